"""SOP / NSP sentence-pair instances from one document (reference section 3, GA l.266).

Per document: ``target = max_seq_length - 3``, or with probability ``short_seq_prob`` a uniform
integer in ``[2, target]`` (drawn once per document, as the reference does). Sentences are
appended to a chunk until its length reaches the target or the document ends; ``A`` is the first
``a_end`` segments (``a_end`` uniform in ``[1, n-1]`` for ``n >= 2`` segments), ``B`` the rest.

* A one-segment chunk (any mode), or in NSP mode with probability 0.5: ``B`` comes from a random
  other document (10 tries), starting at a random sentence, until ``|B| >= target - |A|``; the
  chunk's unused segments are put back; label 1.
* Otherwise, in SOP mode with probability 0.5, ``A`` and ``B`` are swapped, label 1; else 0.

``single_segment='split'`` is our option against the reference's label bias: a one-segment chunk
of two or more tokens is cut at a uniform token position into ``A``/``B`` and then treated like
any two-segment chunk (so SOP labels stay balanced and ``B`` is never off-topic). The default
``'random_doc'`` is the reference behaviour (google-research/albert#234).

Truncation (``truncate_seq_pair``): while ``|A|+|B| > target_max``, drop one token from the longer
side (ties: ``B``), from the front or back with probability 1/2 each. The number of tokens each
side loses is a function of the lengths alone, so it is computed in closed form and only the
front/back coin flips are drawn.

All randomness comes from the ``numpy.random.Generator`` passed in; the pipeline seeds it from
(seed, epoch, document id), so the instances of a document are a pure function of those.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from albert_jax.text.tokenization import CLS_ID, SEP_ID

MODES = ("sop", "nsp")
SINGLE_SEGMENT = ("random_doc", "split")


@dataclasses.dataclass
class Instance:
    tokens: np.ndarray  # int32 [len], [CLS] A [SEP] B [SEP]
    segment_ids: np.ndarray  # int32 [len]
    token_boundary: np.ndarray  # bool [len], whole-word starts (True at specials)
    label: int  # 0 natural order, 1 swapped or random-document B
    # Diagnostics (not needed for training; used by tests and inspect_data).
    len_a: int = 0
    short_target: bool = False
    target_length: int = 0
    num_chunk_segments: int = 0
    random_doc: bool = False
    swapped: bool = False


Document = tuple[Sequence[np.ndarray], Sequence[np.ndarray]]  # (sentence ids, word starts)


def truncate_pair(
    a: tuple[np.ndarray, np.ndarray],
    b: tuple[np.ndarray, np.ndarray],
    max_num_tokens: int,
    rng: np.random.Generator,
):
    """Reference ``truncate_seq_pair`` on (ids, word_starts) pairs, in closed form."""
    la, lb = len(a[0]), len(b[0])
    excess = la + lb - max_num_tokens
    if excess <= 0:
        return a, b
    cut_a = cut_b = 0
    if la > lb:
        d = min(excess, la - lb)
        cut_a += d
        excess -= d
    elif lb > la:
        d = min(excess, lb - la)
        cut_b += d
        excess -= d
    # Equal lengths: ties go to B, then the sides alternate.
    cut_b += (excess + 1) // 2
    cut_a += excess // 2

    def cut(side, n):
        if n == 0:
            return side
        front = int(np.count_nonzero(rng.random(n) < 0.5))
        end = len(side[0]) - (n - front)
        return side[0][front:end], side[1][front:end]

    return cut(a, cut_a), cut(b, cut_b)


def _concat(parts: Sequence[np.ndarray], dtype) -> np.ndarray:
    if not parts:
        return np.zeros((0,), dtype)
    return np.concatenate(parts).astype(dtype, copy=False)


def assemble(a_ids, a_starts, b_ids, b_starts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``[CLS] A [SEP] B [SEP]`` with segment ids and word-start flags.

    The first token after ``[CLS]``/``[SEP]`` always starts a word (a front-truncated segment may
    begin with a continuation piece; the reference would glue it to the word before ``[SEP]``).
    """
    la, lb = len(a_ids), len(b_ids)
    n = la + lb + 3
    tokens = np.empty(n, np.int32)
    tokens[0] = CLS_ID
    tokens[1 : 1 + la] = a_ids
    tokens[1 + la] = SEP_ID
    tokens[2 + la : 2 + la + lb] = b_ids
    tokens[-1] = SEP_ID
    seg = np.zeros(n, np.int32)
    seg[2 + la :] = 1
    starts = np.ones(n, np.bool_)
    starts[1 : 1 + la] = a_starts
    starts[2 + la : 2 + la + lb] = b_starts
    starts[1] = True
    starts[2 + la] = True
    return tokens, seg, starts


def create_instances(
    document: Document,
    doc_index: int,
    num_documents: int,
    get_document: Callable[[int], Document],
    rng: np.random.Generator,
    *,
    max_seq_length: int,
    short_seq_prob: float = 0.1,
    mode: str = "sop",
    single_segment: str = "random_doc",
) -> list[Instance]:
    """All instances of one document (reference ``create_instances_from_document``)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if single_segment not in SINGLE_SEGMENT:
        raise ValueError(f"single_segment must be one of {SINGLE_SEGMENT}, got {single_segment!r}")
    max_num_tokens = max_seq_length - 3
    if max_num_tokens < 2:
        raise ValueError(f"max_seq_length must be >= 5, got {max_seq_length}")
    sents, starts = document
    lengths = [len(s) for s in sents]
    target = max_num_tokens
    short = bool(rng.random() < short_seq_prob)
    if short:
        target = int(rng.integers(2, max_num_tokens + 1))

    instances: list[Instance] = []
    chunk: list[int] = []  # sentence indices
    chunk_len = 0
    i = 0
    n_sent = len(sents)
    while i < n_sent:
        chunk.append(i)
        chunk_len += lengths[i]
        if i == n_sent - 1 or chunk_len >= target:
            n_seg = len(chunk)
            a_parts = b_parts = None
            label = 0
            random_doc = swapped = False
            if n_seg == 1 and single_segment == "split" and lengths[chunk[0]] >= 2:
                s = chunk[0]
                cut = int(rng.integers(1, lengths[s]))
                a_parts = ([sents[s][:cut]], [starts[s][:cut]])
                b_parts = ([sents[s][cut:]], [starts[s][cut:]])
                split_one = True
            else:
                split_one = False
                a_end = int(rng.integers(1, n_seg)) if n_seg >= 2 else 1
                a_idx = chunk[:a_end]
                a_parts = ([sents[j] for j in a_idx], [starts[j] for j in a_idx])
            a_len = sum(len(x) for x in a_parts[0])
            if (n_seg == 1 and not split_one) or (mode == "nsp" and rng.random() < 0.5):
                label, random_doc = 1, True
                target_b = target - a_len
                other = doc_index
                for _ in range(10):
                    other = int(rng.integers(0, num_documents))
                    if other != doc_index:
                        break
                o_sents, o_starts = get_document(other)
                start = int(rng.integers(0, len(o_sents)))
                b_ids, b_st, b_len = [], [], 0
                for j in range(start, len(o_sents)):
                    b_ids.append(o_sents[j])
                    b_st.append(o_starts[j])
                    b_len += len(o_sents[j])
                    if b_len >= target_b:
                        break
                b_parts = (b_ids, b_st)
                if not split_one:
                    i -= n_seg - a_end  # put the unused segments back
            else:
                if not split_one:
                    b_idx = chunk[a_end:]
                    b_parts = ([sents[j] for j in b_idx], [starts[j] for j in b_idx])
                if mode == "sop" and rng.random() < 0.5:
                    label, swapped = 1, True
                    a_parts, b_parts = b_parts, a_parts
            a = (_concat(a_parts[0], np.int32), _concat(a_parts[1], np.bool_))
            b = (_concat(b_parts[0], np.int32), _concat(b_parts[1], np.bool_))
            a, b = truncate_pair(a, b, max_num_tokens, rng)
            if len(a[0]) == 0 or len(b[0]) == 0:
                raise AssertionError(
                    f"empty segment in document {doc_index} (lengths {lengths}); "
                    "documents must not contain empty sentences"
                )
            tokens, seg, tb = assemble(a[0], a[1], b[0], b[1])
            instances.append(
                Instance(
                    tokens=tokens,
                    segment_ids=seg,
                    token_boundary=tb,
                    label=label,
                    len_a=len(a[0]),
                    short_target=short,
                    target_length=target,
                    num_chunk_segments=n_seg,
                    random_doc=random_doc,
                    swapped=swapped,
                )
            )
            chunk = []
            chunk_len = 0
        i += 1
    return instances
