"""The random-weight Hugging Face Marian model of OPUS-MT's shape that
`opus_mt.py` races, built with transformers (run in a process where torch,
transformers and sentencepiece are importable; `opus_mt.py` starts it).

    python benchmarks/_opus_mt_model.py FOLDER SENTENCES.json [--quick]

SENTENCES.json holds `{"corpus": [...], "calibration": [...]}` (written by
`opus_mt.py`). FOLDER gets what `save_pretrained` and `MarianTokenizer`
write for an OPUS-MT model (`config.json`, `generation_config.json`,
`model.safetensors`, `source.spm`, `target.spm`, `vocab.json`, ...), a
`README.md` with OPUS-MT's licence in its front matter, `build.json` (the
sizes, the end-of-sentence bias and the greedy lengths it gave) and
`ctranslate2/`: the folder converted by CTranslate2's own
`TransformersConverter` (float32 weights; int8 is chosen when CTranslate2
loads it).

The weights are drawn by `tools/make_marian_fixtures.py`'s `randomize`
(decisive, so that no greedy step is near a tie) but for `<pad>`'s
embedding row, zero as in OPUS-MT (the decoder's start: CTranslate2 starts
from a zero embedding whatever the row holds), and the bias of `</s>`
in `final_logits_bias` is searched for (bisection) so that greedy outputs
of the calibration sentences have about the sources' length: random weights
that stop, rather than outputs that all run to the length limit.
"""

import argparse
import importlib.util
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# benchmarks/ctranslate2.py would shadow the `ctranslate2` package; a folder
# with torch and transformers installed apart (pip --target) goes last, so
# that this environment's own packages (NumPy) win.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]
sys.path += [p for p in os.environ.get("OPUS_MT_EXTRA_PATH", "").split(os.pathsep) if p]

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import (  # noqa: E402
    GenerationConfig,
    MarianConfig,
    MarianMTModel,
    MarianTokenizer,
)

# OPUS-MT's shape (Helsinki-NLP/opus-mt-en-es: 6+6 layers, d_model 512,
# 8 heads, feed-forward 2048, SiLU, tied shared embeddings).
SHAPE = dict(d_model=512, encoder_layers=6, decoder_layers=6, encoder_attention_heads=8,
             decoder_attention_heads=8, encoder_ffn_dim=2048, decoder_ffn_dim=2048,
             max_position_embeddings=512, activation_function="swish")
QUICK_SHAPE = dict(SHAPE, d_model=64, encoder_layers=2, decoder_layers=2,
                   encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                   decoder_ffn_dim=128)
VOCABULARY = 58_000  # SentencePiece pieces (OPUS-MT en-es: 65,001 ids; opus-mt-de-en 58,101)
QUICK_VOCABULARY = 2_000
SEED = 7
MAX_NEW_TOKENS = 64
README = """\
---
license: cc-by-4.0
language: [en, es]
tags: [translation, marian]
---

# opus-mt-benchmark-random

A random-weight model of Helsinki-NLP's OPUS-MT shape, made by
keras_attention's benchmarks/_opus_mt_model.py (not a translation model).
"""


def _fixtures_tool():
    """tools/make_marian_fixtures.py as a module (its SentencePiece trainer,
    vocabulary layout and weight randomizer)."""
    path = os.path.join(os.path.dirname(HERE), "tools", "make_marian_fixtures.py")
    spec = importlib.util.spec_from_file_location("make_marian_fixtures", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def greedy_lengths(model, tokenizer, sentences):
    batch = tokenizer(sentences, return_tensors="pt", padding=True)
    with torch.inference_mode():
        out = model.generate(**batch, num_beams=1, max_new_tokens=MAX_NEW_TOKENS,
                             do_sample=False)
    return [int((row[1:] != tokenizer.pad_token_id).sum()) for row in out]


def calibrate_eos(model, tokenizer, sentences, eos_id):
    """The `</s>` bias (added to the drawn one) whose greedy outputs are, on
    average, as long as the sources (in pieces, `</s>` included)."""
    goal = float(np.mean([len(tokenizer(s)["input_ids"]) for s in sentences]))
    base = model.final_logits_bias[0, eos_id].item()
    low, high = 0.0, 200.0
    for _ in range(10):
        middle = (low + high) / 2
        with torch.no_grad():
            model.final_logits_bias[0, eos_id] = base + middle
        mean = float(np.mean(greedy_lengths(model, tokenizer, sentences)))
        low, high = (middle, high) if mean > goal else (low, middle)
        if abs(mean - goal) < 1.0:
            break
    return middle, mean, goal


def build(folder, corpus, calibration, quick=False):
    tool = _fixtures_tool()
    size = QUICK_VOCABULARY if quick else VOCABULARY
    spm = tool.spm_model(corpus, size)
    vocab = tool.marian_vocab(tool.piece_counts(spm, corpus))
    os.makedirs(folder, exist_ok=True)
    for name in ("source.spm", "target.spm"):
        with open(os.path.join(folder, name), "wb") as f:
            f.write(spm)
    with open(os.path.join(folder, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, indent=2)
    pad = vocab["<pad>"]
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"source_lang": "en", "target_lang": "es", "separate_vocabs": False,
                   "model_max_length": 512, "eos_token": "</s>", "unk_token": "<unk>",
                   "pad_token": "<pad>", "tokenizer_class": "MarianTokenizer"}, f, indent=2)
    config = MarianConfig(
        vocab_size=len(vocab), decoder_vocab_size=len(vocab), **(QUICK_SHAPE if quick else SHAPE),
        scale_embedding=True, share_encoder_decoder_embeddings=True, tie_word_embeddings=True,
        pad_token_id=pad, eos_token_id=0, bos_token_id=0, forced_eos_token_id=None,
        decoder_start_token_id=pad, dropout=0.1, attention_dropout=0.0, activation_dropout=0.0,
        init_std=tool.EMBEDDING_STD)
    torch.manual_seed(SEED)
    model = MarianMTModel(config).eval()
    tool.randomize(model, SEED, 0, 0.0)
    with torch.no_grad():  # <pad>'s row zero, as in OPUS-MT (CTranslate2 starts from zeros)
        model.get_input_embeddings().weight[pad] = 0.0
    tokenizer = MarianTokenizer.from_pretrained(folder)
    bias, mean, goal = calibrate_eos(model, tokenizer, calibration, 0)
    # No forced `</s>` at the length limit: every system stops there alike.
    model.generation_config = GenerationConfig(
        bad_words_ids=[[pad]], bos_token_id=0, decoder_start_token_id=pad, eos_token_id=0,
        forced_eos_token_id=None, max_length=MAX_NEW_TOKENS + 1, num_beams=4,
        length_penalty=1.0, early_stopping=True, pad_token_id=pad, renormalize_logits=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    with open(os.path.join(folder, "README.md"), "w", encoding="utf-8") as f:
        f.write(README)
    import ctranslate2

    ctranslate2.converters.TransformersConverter(folder).convert(
        os.path.join(folder, "ctranslate2"), force=True)
    record = {"vocabulary": len(vocab), "parameters": sum(p.numel() for p in model.parameters()),
              "eos_bias_added": bias, "greedy_mean_length": mean,
              "calibration_mean_source_length": goal, "torch": torch.__version__,
              "transformers": transformers.__version__, "ctranslate2": ctranslate2.__version__,
              "config": {k: getattr(config, k) for k in SHAPE}}
    with open(os.path.join(folder, "build.json"), "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1)
    return record


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder")
    parser.add_argument("sentences")
    parser.add_argument("--quick", action="store_true", help="a small model (smoke runs)")
    args = parser.parse_args(argv)
    torch.set_num_threads(os.cpu_count())
    with open(args.sentences, encoding="utf-8") as f:
        sentences = json.load(f)
    record = build(args.folder, sentences["corpus"], sentences["calibration"], args.quick)
    print(json.dumps(record), file=sys.stderr)


if __name__ == "__main__":
    main()
