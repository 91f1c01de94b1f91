"""The data section of a pretraining config: one typed section, its defaults in one place.

Every pretraining config's `data` section starts from `DataConfig.section()`
(`configs/pretrain/common.py:get_data_config`, which also names the input: People's Daily), so
each leaf below exists and parses on the command line (`--config.data.vocab_size=4000`); the
library reads a section back with `DataConfig.from_config(config.data)`, never with a default of
its own. The pipeline's checks of these values are
`albert_jax.data.pretraining.pipeline.check_config`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from albert_jax.sections import Section


@dataclasses.dataclass(frozen=True)
class DataConfig(Section):
    # Corpus: raw input -> tokenized TFDS ArrayRecord under data_dir/<builder>/<corpus_name>.
    # input_files: comma-separated files, directories (every file under them) and globs (or a
    # list of them: `corpus.resolve_paths` makes it one); the config files name People's Daily.
    input_files: Any = ""
    input_format: str = "tagged"  # text | jsonl | tagged | tfds
    corpus_name: str = ""  # '' = named from the inputs and settings (a new name when they change)
    text_field: str = "text"  # jsonl / tfds
    tfds_name: str = ""  # input_format='tfds': an existing ArrayRecord text dataset
    tfds_split: str = "train"
    tfds_data_dir: str = ""  # where that dataset lives (relative to data_dir; '' = TFDS default)
    on_invalid_utf8: str = "skip"  # or 'error'
    max_sentence_tokens: int = 512  # longer sentences are cut (counted in the build stats)
    prepare_processes: int = 0  # tokenizing processes (0: a core per 16 MB of input, up to all)
    data_dir: str = "data"  # relative to the working directory
    # Tokenizer: trained on the input into tokenizer_dir (relative to data_dir) unless
    # tokenizer_model names one to use (a SentencePiece .model, a WordPiece vocab.txt or a
    # transformers / Google release directory), which is then copied there.
    tokenizer_dir: str = "tokenizer"
    tokenizer_model: str = ""
    vocab_size: int = 8000
    hard_vocab_limit: bool = True  # False: a corpus too small for vocab_size gets fewer pieces
    character_coverage: float = 0.9995  # Chinese; ~1.0 for English
    lower_case: bool = True  # for tokenizer_model files too (a directory's own setting wins)
    # SentencePiece encoding: 'transformers' (AlbertTokenizer's, what released checkpoints are
    # used with) or 'reference' (google-research/albert's under Python 3); see tokenization.py.
    tokenizer_mode: str = "transformers"
    # SentencePiece model: 'unigram' (the reference) or 'char' (one piece per character: for
    # Chinese at small scale, where a word-piece vocabulary is too sparse to learn in minutes).
    tokenizer_type: str = "unigram"
    # Examples.
    max_seq_length: int = 128
    max_predictions: int = 20
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    ngram: int = 3
    favor_shorter_ngram: bool = True
    mode: str = "sop"  # sop | nsp
    single_segment: str = "random_doc"  # reference; 'split' avoids the random-document label bias
    shuffle_window: int = 512  # examples shuffled together after flattening (0: off)
    global_batch_size: int = 32
    seed: int = 12345
    worker_count: int = 1  # grain worker processes (0: in the main process)
    worker_buffer_size: int = 4
    docs_per_element: int = 8  # documents per grain element (amortises per-element overhead)
    debug: bool = False  # add diagnostic fields (spans, chunk info) to each example
