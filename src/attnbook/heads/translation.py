"""English-Spanish Bible translation data for chapter "A translation model" and
chapter "Pruning heads" (pruning heads): the shipped verse pairs, the joint BPE tokenizer, padded batches, the dev-set
dependency parses, source-token frequencies, greedy translation and BLEU.

Everything is read from ``attnbook/data/translation/``, written by ``scripts/make_translation_data.py``
(King James Version / Reina-Valera 1909, both public domain; see the README there).
"""

from __future__ import annotations

import gzip
import json
import random
import time
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple, Optional, Sequence

import torch
from tokenizers import Tokenizer

from attnbook.heads.seq2seq import Seq2SeqConfig, Seq2SeqTransformer, load_model
from attnbook.core.train import train
from attnbook.core import runs
from attnbook.stats import bleu
from attnbook.core.runs import DATA
from attnbook.core.presets import active_preset

DATA_DIR = DATA / "translation"
SPLITS = ("train", "dev", "test")
PAD, BOS, EOS = 0, 1, 2


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")


@lru_cache(maxsize=None)
def _all_pairs() -> tuple:
    path = DATA_DIR / "pairs.tsv.gz"
    if not path.exists():
        raise ValueError(f"{path} is missing; run scripts/make_translation_data.py")
    rows = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        next(f)
        for line in f:
            split, key, en, es = line.rstrip("\n").split("\t")
            rows.append((split, key, en, es))
    return tuple(rows)


@lru_cache(maxsize=None)
def _leaked() -> frozenset:
    """Keys of dev/test verses whose English or Spanish text occurs verbatim in train (repeated verses
    such as "And the LORD spake unto Moses, saying,"): 15 dev and 12 test pairs of the shipped split."""
    train = [(en, es) for s, _, en, es in _all_pairs() if s == "train"]
    en_seen, es_seen = {en for en, _ in train}, {es for _, es in train}
    return frozenset(k for s, k, en, es in _all_pairs() if s != "train" and (en in en_seen or es in es_seen))


def load_pairs(split: str, with_keys: bool = False) -> list:
    """The ``(english, spanish)`` verse pairs of ``split`` (``"train"``, ``"dev"`` or ``"test"``), in the
    shipped order; ``with_keys=True`` gives ``(key, english, spanish)`` (chapter "A translation model"). Dev and test
    leave out the verses whose text occurs verbatim in train, so that no score rewards memorising them."""
    _check_split(split)
    leaked = _leaked() if split != "train" else frozenset()
    return [(k, en, es) if with_keys else (en, es) for s, k, en, es in _all_pairs()
            if s == split and k not in leaked]


def training_pairs(fraction: float = 1.0) -> list:
    """The training verse pairs a model is trained on (chapter "A translation model"): all of them, in the shipped
    order, or the first ``fraction`` of one fixed random permutation (seed 0), so that smaller fractions are
    subsets of larger ones and every seed of a recipe sees the same verses (the data-size runs of the role
    table). ``ValueError`` unless ``0 < fraction <= 1``."""
    if not 0 < fraction <= 1:
        raise ValueError(f"expected a fraction of the training verses in (0, 1], got {fraction!r}")
    pairs = load_pairs("train")
    if fraction == 1:
        return pairs
    n = round(fraction * len(pairs))
    if n == 0:
        raise ValueError(f"a fraction of {fraction!r} of {len(pairs)} training verses keeps none")
    order = random.Random(0).sample(range(len(pairs)), len(pairs))
    return [pairs[i] for i in sorted(order[:n])]


@lru_cache(maxsize=None)
def load_tokenizer():
    """The joint English-Spanish BPE tokenizer (``tokenizers.Tokenizer``, 8000 tokens; ids 0-3 are
    ``<pad> <s> </s> <unk>``) (chapter "A translation model")."""

    return Tokenizer.from_file(str(DATA_DIR / "tokenizer.json"))


def encode(sentences: Sequence[str], max_len: int = 128, bos: bool = False) -> list[list[int]]:
    """Token ids of each sentence, ending in ``</s>`` (and starting with ``<s>`` when ``bos``), cut to
    ``max_len`` tokens (chapter "A translation model")."""
    if isinstance(sentences, str):
        raise ValueError("encode expects a list of sentences, got a single string")
    if max_len < 3:
        raise ValueError(f"max_len must be at least 3, got {max_len}")
    out = []
    for enc in load_tokenizer().encode_batch(list(sentences)):
        ids = enc.ids[: max_len - 1 - int(bos)]
        out.append(([BOS] if bos else []) + ids + [EOS])
    return out


def pad(seqs: Sequence[Sequence[int]]) -> torch.Tensor:
    """Right-pad id lists with ``<pad>`` (0) into a ``(batch, max length)`` long tensor (chapter "A translation
    model")."""
    if not seqs:
        raise ValueError("pad needs at least one sequence")
    n = max(len(s) for s in seqs)
    out = torch.full((len(seqs), n), PAD, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.as_tensor(list(s), dtype=torch.long)
    return out


def decode(ids: Sequence[Sequence[int]]) -> list[str]:
    """Detokenised text of each id list (special tokens dropped) (chapter "A translation model")."""
    return load_tokenizer().decode_batch([list(i) for i in ids])


class BatchStream:
    """Length-bucketed, shuffled training batches ``(src, tgt)`` of padded ids, epoch after epoch
    (chapter "A translation model"). ``stream(step)`` returns batch number ``step`` (so it is a ``batch_fn`` for
    :func:`attnbook.core.train.train`); the order depends only on ``seed``.

    Batches hold ``batch_size`` pairs, or, with ``max_tokens``, as many length-sorted pairs as fit in
    ``max_tokens`` padded tokens (pairs x the longer side's longest length, as fairseq's
    ``--max-tokens`` counts them), so short verses come in large batches and long ones in small.
    """

    def __init__(self, pairs: Sequence[tuple[str, str]], batch_size: int = 64, max_len: int = 128,
                 seed: int = 0, max_tokens: Optional[int] = None) -> None:
        if batch_size < 1 or not pairs:
            raise ValueError(f"need a positive batch_size and at least one pair, got {batch_size}, {len(pairs)}")
        if max_tokens is not None and max_tokens < max_len:
            raise ValueError(f"max_tokens={max_tokens} must be at least max_len={max_len}")
        self.src = encode([p[0] for p in pairs], max_len)
        self.tgt = encode([p[1] for p in pairs], max_len, bos=True)
        self.batch_size, self.seed, self.max_tokens = batch_size, seed, max_tokens
        self._epoch, self._batches = -1, []
        self._epoch_sizes: list[int] = []
        self.batches_per_epoch = len(self._make_epoch(0))

    def _size(self, i: int) -> int:
        return max(len(self.src[i]), len(self.tgt[i]))

    def _make_epoch(self, epoch: int) -> list[list[int]]:
        rng = random.Random(self.seed * 100003 + epoch)
        idx = list(range(len(self.src)))
        rng.shuffle(idx)
        chunk = self.batch_size * 50 if self.max_tokens is None else 100 * self.max_tokens // 32
        batches = []
        for c in range(0, len(idx), chunk):
            part = sorted(idx[c: c + chunk], key=lambda i: len(self.src[i]) + len(self.tgt[i]))
            if self.max_tokens is None:
                batches += [part[b: b + self.batch_size] for b in range(0, len(part), self.batch_size)]
                continue
            batch, longest = [], 0
            for i in part:
                if batch and (len(batch) + 1) * max(longest, self._size(i)) > self.max_tokens:
                    batches.append(batch)
                    batch, longest = [], 0
                batch.append(i)
                longest = max(longest, self._size(i))
            batches.append(batch)
        rng.shuffle(batches)
        return batches

    def _locate(self, step: int) -> tuple[int, int]:
        """(epoch, batch within the epoch) of batch number ``step``."""
        epoch = 0
        while True:
            if epoch == len(self._epoch_sizes):
                self._epoch_sizes.append(len(self._make_epoch(epoch)))
            if step < self._epoch_sizes[epoch]:
                return epoch, step
            step -= self._epoch_sizes[epoch]
            epoch += 1

    def epochs(self, steps: int) -> float:
        """How many passes over the pairs ``steps`` batches make (chapter "A translation model" reports training
        epochs)."""
        epoch, i = self._locate(steps)
        return epoch + i / self._epoch_sizes[epoch]

    def __call__(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        epoch, i = self._locate(step)
        if epoch != self._epoch:
            self._epoch, self._batches = epoch, self._make_epoch(epoch)
        b = self._batches[i]
        return pad([self.src[j] for j in b]), pad([self.tgt[j] for j in b])


@torch.no_grad()
def translate(model, sentences: Sequence[str], batch_size: int = 64, max_len: int = 128,
              head_gates=None, beam: int = 1, length_penalty: float = 0.6) -> list[str]:
    """Translations of English ``sentences`` by a :class:`attnbook.seq2seq.Seq2SeqTransformer` (chapter "A translation
    model"): greedy (``beam=1``) or beam search with the GNMT length penalty (``beam=4, length_penalty=0.6`` as the
    official code of Voita et al.). Sentences are decoded in length-sorted batches; the output keeps the
    input order."""
    if isinstance(sentences, str):
        raise ValueError("translate expects a list of sentences, got a single string")
    model.eval()
    dev = next(model.parameters()).device
    src = encode(sentences, max_len)
    order = sorted(range(len(src)), key=lambda i: len(src[i]))
    out: list[Optional[str]] = [None] * len(src)
    for b in range(0, len(order), batch_size):
        idx = order[b: b + batch_size]
        x = pad([src[i] for i in idx]).to(dev)
        longest = max(len(src[i]) for i in idx)
        steps = int(1.6 * longest) + 10
        hyp = (model.greedy_decode(x, max_new_tokens=steps, head_gates=head_gates) if beam == 1 else
               model.beam_decode(x, beam=beam, length_penalty=length_penalty, max_new_tokens=steps,
                                 head_gates=head_gates))
        for i, text in zip(idx, decode(hyp)):
            out[i] = text
    return out  # type: ignore[return-value]


def repeats_a_phrase(text: str, min_repeats: int = 3, max_n: int = 4) -> bool:
    """Whether ``text`` loops: some phrase of 1 to ``max_n`` words occurs ``min_repeats`` times in a row
    ("te te te", "y dijo y dijo y dijo") (chapter "A translation model"'s check that greedy output no longer loops)."""
    words = text.split()
    for n in range(1, max_n + 1):
        for start in range(len(words) - n * min_repeats + 1):
            phrase = words[start: start + n]
            if all(words[start + k * n: start + (k + 1) * n] == phrase for k in range(1, min_repeats)):
                return True
    return False


def load_dev_parses() -> list[dict]:
    """spaCy silver parses of the English dev sentences, aligned with ``load_pairs("dev")`` (chapter "A translation
    model"): for each sentence ``words``, ``word_of_token`` (the word index of each source BPE token, -1 for a bare word-start
    marker) and ``arcs`` ``[dependent, head, label]`` (ClearNLP labels, e.g. nsubj, dobj, amod, advmod)."""
    with gzip.open(DATA_DIR / "dev_parses.json.gz", "rt", encoding="utf-8") as f:
        parses = json.load(f)
    keys = [k for s, k, _, _ in _all_pairs() if s == "dev"]
    if len(keys) != len(parses):
        raise ValueError(f"dev_parses.json.gz has {len(parses)} sentences for {len(keys)} dev verses")
    leaked = _leaked()
    return [p for k, p in zip(keys, parses) if k not in leaked]


class Verses(NamedTuple):
    """Dev verses as the head analyses read them: ``english`` text, ``src_ids`` and ``tgt_ids`` (unpadded, the
    target ``BOS ... EOS``) and their spaCy ``parses``."""

    english: list
    src_ids: list
    tgt_ids: list
    parses: list


def analysis_verses(n: int, max_len: int) -> Verses:
    """The first ``n`` dev verses that the head analyses read (chapters "A translation model" and "Pruning heads"),
    without those whose English does not fit in ``max_len`` tokens (their source would be cut, and their parse
    would no longer match it)."""
    if n < 1:
        raise ValueError(f"need at least one verse, got n={n}")
    pairs, parses, tok = load_pairs("dev")[:n], load_dev_parses()[:n], load_tokenizer()
    keep = [i for i, (en, _) in enumerate(pairs) if len(tok.encode(en).ids) < max_len]
    english = [pairs[i][0] for i in keep]
    return Verses(english, encode(english, max_len), encode([pairs[i][1] for i in keep], max_len, bos=True),
                  [parses[i] for i in keep])


def source_token_counts() -> torch.Tensor:
    """How often each BPE token occurs on the English side of the training split, ``(vocab,)`` (chapter "A translation
    model")."""
    counts = json.loads((DATA_DIR / "src_token_counts.json").read_text())
    return torch.tensor([counts[str(i)] for i in range(len(counts))], dtype=torch.long)


def converged_evaluation(preset: str | None = None) -> dict:
    """The shipped whole-test-split evaluation of the converged model (run ``translation_eval``,
    ``scripts/evaluate_translation.py``) at ``preset`` (default: the active one), or a falsy
    :class:`attnbook.core.runs.Missing` where there is none (:func:`attnbook.core.runs.find`)."""
    return runs.find("translation_eval", preset)


def load_translation_model(run: str = "translation_model", preset: str | None = None, device=None):
    """A shipped translation model, ``(model, meta)``: run ``translation_model`` (the converged model chapters
    "A translation model" and "Pruning heads" analyse and prune) or one of its variants
    (the runs ``translation_model_<variant>``: ``h4``, ``seed1``, the role grid's cells) at ``preset``
    (default: the active one); its record is checked against the run table first (:func:`attnbook.core.runs.load`,
    :class:`attnbook.core.runs.NotAtPreset` where there is none)."""
    models = sorted(r for r in runs.RUNS if r.startswith("translation_model"))
    if run not in models:
        raise ValueError(f"expected one of the runs {models}, got {run!r}")
    record = runs.load(run, preset)
    weights, = runs.run(run).also_paths(record["meta"]["preset"])
    model, meta = load_model(weights, device)
    return model, {**meta, "meta": record["meta"]}


class ChapterModel(NamedTuple):
    """The model a Part III page analyses (:func:`chapter_model`): the model, its meta, and ``notice``, a
    sentence for the page when that is not the active preset's own model ("" when it is)."""

    model: Seq2SeqTransformer
    meta: dict
    notice: str


def chapter_model(run: str = "translation_model", device=None, preset: str | None = None) -> ChapterModel:
    """The translation model a Part III page analyses at ``preset`` (default: the active one): that preset's
    model where its file is shipped, otherwise the ``quick`` model, the one the pruning runs prune, with a
    ``notice`` that says so plainly and names the command that makes the preset's own model (chapters "A
    translation model" and "Pruning heads")."""
    p = active_preset() if preset is None else preset
    try:
        return ChapterModel(*load_translation_model(run, p, device), notice="")
    except runs.NotAtPreset:  # no file of the run at this preset, or the run is not defined there
        pass
    model, meta = load_translation_model(run, "quick", device)
    c = model.cfg
    what = f"d={c.d_model}, {c.n_heads} heads of {c.d_model // c.n_heads} dimensions"
    make = (f" Make the `{p}` model with `{runs.command(run, p)}` (file `{runs.output_path(run, p).name}`)."
            if p in runs.run(run).settings else f" Run `{run}` is not defined at preset `{p}`.")
    notice = (f"**Not the `{p}` model.** This page runs at preset `{p}`, and no `{p}` model of run `{run}` is "
              f"shipped. It analyses the `quick` model ({what}) with the `{p}` preset's numbers of verses: "
              f"every result below is that model's.{make}")
    return ChapterModel(model, meta, notice)


def model_from_preset(p: dict) -> Seq2SeqTransformer:
    """A freshly initialised :class:`attnbook.seq2seq.Seq2SeqTransformer` at the sizes of a ``translation``
    preset ``p`` and the shipped tokenizer's vocabulary (chapter "A translation model"); seed first."""
    return Seq2SeqTransformer(Seq2SeqConfig(
        vocab_size=load_tokenizer().get_vocab_size(), d_model=p["d_model"], n_heads=p["n_heads"],
        enc_layers=p["enc_layers"], dec_layers=p["dec_layers"], d_ff=p["d_ff"], dropout=p["dropout"],
        attention_dropout=p["attention_dropout"], max_len=p["max_len"]))


def train_model(model, batches, *, steps: int, lr: float, weight_decay: float, warmup: float,
                label_smoothing: float, seed: int, head_gates=None, device=None, **train_kwargs) -> dict:
    """Train a translation model with the shipped checkpoint's recipe (chapter "A translation model"; chapter "Pruning
    heads" trains pruned shapes from scratch with it): :func:`attnbook.core.train.train` with AdamW, linear warm-up then cosine decay,
    gradient clipping at 1.0, and label-smoothed cross-entropy. ``head_gates`` (``{kind: (layers, heads)}``)
    fixes head masks for the whole training. Other keyword arguments go to ``train`` (``eval_fn``,
    ``eval_every``, ``progress``, ``desc``). Returns its history."""
    def loss_fn(m, batch):
        src, tgt = batch
        return m.loss(src, tgt, head_gates=head_gates, label_smoothing=label_smoothing)

    return train(model, batches, loss_fn, steps=steps, lr=lr, optimizer="adamw", weight_decay=weight_decay,
                 warmup=warmup, schedule="cosine", clip=1.0, seed=seed, device=device, **train_kwargs)


def average_state(states: Sequence[dict]) -> dict:
    """The element-wise mean of state dicts (checkpoint averaging, as fairseq's IWSLT recipe)."""
    if not states:
        raise ValueError("average_state needs at least one state dict")
    return {k: sum(s[k].float() for s in states) / len(states) for k in states[0]}


def train_to_convergence(model, p: dict, *, steps: Optional[int] = None, head_gates=None,
                         state_path=None, resume: bool = False, time_limit: Optional[float] = None,
                         step_fn=None, start_extra: Optional[dict] = None, log=print) -> dict:
    """Train a translation model to convergence with the shipped checkpoint's recipe (chapter "A translation
    model"; chapter "Pruning heads" trains the pruned shapes from scratch with it, ``head_gates`` fixing their
    head masks for the whole training): :func:`train_model`'s optimiser and loss on token-based batches;
    every ``p["eval_every"]`` steps dev cross-entropy and greedy dev BLEU on the first ``p["n_eval_bleu"]``
    dev verses, keeping the last ``p["average_last"]`` weights; early stop after ``p["patience"]``
    evaluations without a better dev BLEU. At the end the model holds the average of the kept weights when
    it is at least as good on dev as the last ones, else the last ones.

    ``p`` is a ``translation`` preset (``attnbook.preset("translation", ...)``, possibly overridden);
    ``state_path``/``resume`` save and continue the full training state; ``time_limit`` in seconds.
    ``step_fn(step, model, extra)`` runs after every step. Returns ``{"hist", "extra", "stream", "averaged",
    "avg_eval", "last_eval", "finished"}``; ``finished`` is false when the time limit stopped training
    before its end (the model is then the last weights, not averaged)."""
    steps = steps or p["train_steps"]
    stream = BatchStream(training_pairs(p.get("data_fraction", 1.0)), batch_size=p["batch_size"], max_len=p["max_len"],
                         seed=p["seed"], max_tokens=p["max_tokens"])
    dev_pairs = load_pairs("dev")[: p["n_eval_bleu"]]
    dev_src = pad(encode([e for e, _ in dev_pairs], p["max_len"]))
    dev_tgt = pad(encode([s for _, s in dev_pairs], p["max_len"], bos=True))
    extra: dict = {"snapshots": [], "best_bleu": -1.0, "since_best": 0, "wall": 0.0, **(start_extra or {})}

    def eval_fn(m, record: bool = True):
        d = next(m.parameters()).device
        loss = float(m.loss(dev_src.to(d), dev_tgt.to(d), head_gates=head_gates))
        hyps = translate(m, [e for e, _ in dev_pairs], max_len=p["max_len"], head_gates=head_gates)
        score = round(bleu(hyps, [s for _, s in dev_pairs]), 2)
        if not record:  # the averaged model's evaluation: not a checkpoint of the training
            log(f"eval: loss {loss:.4f} dev BLEU {score:.2f}")
            return {"dev_loss": round(loss, 4), "dev_bleu": score}
        snap = {k: v.detach().cpu().clone() for k, v in m.state_dict().items()}
        extra["snapshots"] = (extra["snapshots"] + [snap])[-p["average_last"]:]
        if score > extra["best_bleu"]:
            extra["best_bleu"], extra["since_best"] = score, 0
        else:
            extra["since_best"] += 1
        log(f"eval: loss {loss:.4f} dev BLEU {score:.2f} (best {extra['best_bleu']:.2f})")
        return {"dev_loss": round(loss, 4), "dev_bleu": score}

    hist_loss: list = []
    wall_base: list = []
    t_start = time.time()

    def each_step(step, m):
        if not wall_base:  # first step of this process: extra holds the resumed state by now
            wall_base.append(extra["wall"])
        extra["wall"] = wall_base[0] + time.time() - t_start
        if step_fn is not None:
            step_fn(step, m, extra)
        if step % 50 == 0:
            log(f"step {step} loss {hist_loss[-1]:.4f} epoch {stream.epochs(step):.2f} wall {extra['wall']:.0f} s")

    def loss_fn(m, batch):
        src, tgt = batch
        loss = m.loss(src, tgt, head_gates=head_gates, label_smoothing=p["label_smoothing"])
        hist_loss.append(float(loss.detach()))
        return loss

    if resume and state_path is not None and Path(state_path).exists():
        log(f"resuming from {state_path}")
    hist = train(model, stream, loss_fn, steps=steps, lr=p["lr"], optimizer="adamw",
                 weight_decay=p["weight_decay"], warmup=p["warmup"], schedule="cosine", clip=1.0,
                 seed=p["seed"], eval_fn=eval_fn, eval_every=p["eval_every"],
                 stop_when=lambda metrics: extra["since_best"] >= p["patience"], time_limit=time_limit,
                 progress=False, step_fn=each_step, state_path=state_path,
                 state_every=p["eval_every"] if state_path is not None else 0,
                 resume=resume, extra_state=extra)
    log(f"trained {hist['steps_done']} steps ({stream.epochs(hist['steps_done']):.2f} epochs) in "
        f"{hist['time']:.0f} s of steps, {extra['wall']:.0f} s wall; stopped by {hist['stopped']}")
    out = {"hist": hist, "extra": extra, "stream": stream, "finished": True}
    if hist["stopped"] == "time_limit" and hist["steps_done"] < steps:
        out["finished"] = False
        return out
    last_state = {k: v.clone() for k, v in model.state_dict().items()}
    last_eval = hist["evals"][-1]
    model.load_state_dict(average_state(extra["snapshots"]))
    with torch.no_grad():
        avg_eval = eval_fn(model, record=False)
    averaged = avg_eval["dev_bleu"] >= last_eval["dev_bleu"]  # no worse on dev
    if not averaged:
        model.load_state_dict(last_state)
    log(f"averaged {len(extra['snapshots'])} checkpoints: dev BLEU {avg_eval['dev_bleu']} vs last "
        f"{last_eval['dev_bleu']}; keeping the {'average' if averaged else 'last checkpoint'}")
    out.update(averaged=averaged, avg_eval=avg_eval, last_eval=last_eval)
    return out


def shared_text_count(pairs: Sequence[tuple[str, str]], seen: Sequence[tuple[str, str]]) -> int:
    """How many of ``pairs`` have their English or their Spanish text among the texts (either side) of the
    ``seen`` pairs (chapter "A translation model"'s check that no dev or test verse also occurs in train)."""
    texts = {e for e, _ in seen} | {s for _, s in seen}
    return sum(e in texts or s in texts for e, s in pairs)


def late_gain(evals: Sequence[dict], key: str = "dev_bleu", start: float = 0.8) -> tuple[list, float]:
    """The evaluations' ``key`` from step ``start`` times the last step on, and how much it gained there (its
    largest value minus its first): chapter "A translation model"'s convergence gate on the training record."""
    last = evals[-1]["step"]
    tail = [e[key] for e in evals if e["step"] >= start * last]
    return tail, max(tail) - tail[0]


def count_looping(texts: Sequence[str]) -> int:
    """How many of ``texts`` loop (:func:`repeats_a_phrase`; chapter "A translation model"'s third gate)."""
    return sum(map(repeats_a_phrase, texts))


def learned_task_gates(model, sources: Sequence[str], references: Sequence[str], max_len: int = 128) -> dict:
    """The evidence chapter "A translation model"'s gates 2 and 3 read, for any translation model (the
    shipped one, a second seed, a variant): greedy ``bleu`` on ``sources``, ``bleu_without_encoder`` with every
    encoder self-attention head switched off, their difference ``drop``, and ``looping_share``, the share of
    the greedy outputs that loop (:func:`count_looping`)."""
    if len(sources) != len(references) or not sources:
        raise ValueError(f"expected as many references as sources (at least one), got {len(sources)} and "
                         f"{len(references)}")
    cfg = model.cfg
    greedy = translate(model, sources, max_len=max_len)
    off = {"enc_self": torch.zeros(cfg.enc_layers, cfg.n_heads, device=next(model.parameters()).device)}
    ablated = translate(model, sources, max_len=max_len, head_gates=off)
    full, without = bleu(greedy, references), bleu(ablated, references)
    return {"bleu": full, "bleu_without_encoder": without, "drop": full - without,
            "looping_share": count_looping(greedy) / len(greedy)}
