"""A real OPUS-MT model's files with random weights, in the three formats
transformers writes, and transformers' own translations with it: what
tests/convert/test_interop.py converts and compares.

From the real `config.json`, SentencePiece and vocabulary files of an
OPUS-MT model (tests/data/opus_mt/<model>/, vocab.json gzipped there) it
builds a PyTorch `MarianMTModel` of the real shapes with seeded random
weights (tools/make_marian_fixtures.py's `randomize`, with `SCALES` for 512
dimensions: every weight drawn again, biases and LayerNorms included; at the
tiny fixtures' scales one token wins every step of every sentence here; with
these the outputs vary with the source and the previous tokens; `--eos-bias`
added to </s>'s output bias so that the sentences end, at mixed lengths,
before `--max-new-tokens`), and writes into --out:

- safetensors/   model.safetensors (`save_pretrained`);
- bin/           pytorch_model.bin (`save_pretrained(safe_serialization=False)`:
                 torch.save of the state dict);
- h5/            tf_model.h5 (`TFMarianMTModel.from_pretrained(safetensors/,
                 from_pt=True).save_pretrained`: needs transformers 4.x, TensorFlow
                 and tf-keras);

each with the model's real config.json and tokenizer files as uploaded (what
`save_pretrained` rewrites, config.json and generation_config.json, is put back
as the upload has it); and reference.json: for each sentence of `SOURCES`,
transformers' greedy and beam outputs (token ids without the decoder start
token, up to and with </s>; the decoded text; the beams' scores; the greedy
steps' margins between the best and second-best processed score; how many
greedy steps transformers' own bfloat16 predicts alike), generated
by the model loaded back from safetensors/ with the generation defaults it
reads from the folder (an old config.json: num_beams 4, length_penalty and
early_stopping unset, bad_words_ids [[pad]]), max_new_tokens `--max-new-tokens`.

Run with torch and transformers 4.x on the path (tests/interop.py installs
them: `PYTHONPATH=$(python -m tests.interop):. python tools/marian_interop_reference.py
--out DIR`).
"""

import argparse
import gzip
import json
import os
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # transformers' TF models need tf-keras

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import MarianConfig, MarianMTModel, MarianTokenizer  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_marian_fixtures import margin, randomize, trim  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MODEL = REPO_ROOT / "tests" / "data" / "opus_mt" / "opus-mt-en-mg"
SOURCES = [
    "The cat sleeps on the red chair.",
    "My sister reads the old book in the garden every evening.",
    "Where is the train station?",
    "We need more time, but the meeting starts at nine o'clock.",
    "Thank you!",
    "The children of the village walk to school along the river.",
    "He bought 3 apples for 2 dollars.",
    "I do not know the answer.",
]
# randomize()'s scales for a 512-d model: token embeddings N(0, 0.1^2) (x sqrt(512) in the
# model: as large as the positions'), a strong cross-attention (the output depends on the
# source), small biases and output bias (no token favoured everywhere).
SCALES = {"embedding_std": 0.1, "gains": {"attention": 0.2, "cross": 3.0, "ffn": 1.0},
          "bias_std": 0.02, "logits_bias_std": 0.1}
FORMATS = {"safetensors": "model.safetensors", "bin": "pytorch_model.bin", "h5": "tf_model.h5"}


def copy_files(model, folder):
    """The model's files as uploaded (vocab.json unpacked) into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    for path in Path(model).iterdir():
        if path.name.endswith(".gz"):
            (folder / path.name[:-3]).write_bytes(gzip.decompress(path.read_bytes()))
        else:
            shutil.copyfile(path, folder / path.name)
    (folder / "generation_config.json").unlink(missing_ok=True)


def generate(model, tokenizer, sources, max_new_tokens):
    """transformers' greedy and beam outputs with the folder's defaults."""
    batch = tokenizer(sources, padding=True, return_tensors="pt")
    eos = tokenizer.eos_token_id
    with torch.no_grad():
        greedy = model.generate(**batch, num_beams=1, do_sample=False,
                                max_new_tokens=max_new_tokens, output_scores=True,
                                return_dict_in_generate=True)
        beam = model.generate(**batch, do_sample=False, max_new_tokens=max_new_tokens,
                              output_scores=True, return_dict_in_generate=True)
    examples = []
    greedy_text = tokenizer.batch_decode(greedy.sequences, skip_special_tokens=True)
    beam_text = tokenizer.batch_decode(beam.sequences, skip_special_tokens=True)
    for i, source in enumerate(sources):
        tokens = trim(greedy.sequences[i].tolist(), eos)
        examples.append({
            "source": source,
            "greedy": {"tokens": tokens, "text": greedy_text[i],
                       "margins": [margin(greedy.scores[t:], i, 1) for t in range(len(tokens))]},
            "beam": {"tokens": trim(beam.sequences[i].tolist(), eos), "text": beam_text[i],
                     "score": float(beam.sequences_scores[i])},
        })
    generation = model.generation_config
    settings = {"max_new_tokens": max_new_tokens, "num_beams": generation.num_beams,
                "length_penalty": generation.length_penalty,
                "early_stopping": generation.early_stopping,
                "bad_words_ids": generation.bad_words_ids,
                "renormalize_logits": generation.renormalize_logits,
                "forced_eos_token_id": generation.forced_eos_token_id,
                # the searches stopped before max_new_tokens (no forced </s>)
                "greedy_steps": greedy.sequences.shape[1] - 1,
                "beam_steps": beam.sequences.shape[1] - 1}
    return settings, examples


def bfloat16_agreement(model, tokenizer, examples):
    """How many greedy steps transformers' own bfloat16 (torch.autocast on
    the CPU) predicts as its float32 search did, teacher-forced on the
    float32 tokens: `(agreeing steps, steps)`, how sensitive the random model
    is to bfloat16's rounding."""
    agree = steps = 0
    start, pad = model.config.decoder_start_token_id, model.config.pad_token_id
    for example in examples:
        tokens = example["greedy"]["tokens"]
        batch = tokenizer([example["source"]], return_tensors="pt")
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(**batch, decoder_input_ids=torch.tensor([[start] + tokens[:-1]])).logits
        logits = logits[0].float()
        logits[:, pad] = -float("inf")  # bad_words_ids
        agree += sum(int(row.argmax()) == token for row, token in zip(logits, tokens))
        steps += len(tokens)
    return agree, steps


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=str(DEFAULT_MODEL),
                        help="a folder of an OPUS-MT model's config and tokenizer files")
    parser.add_argument("--out", required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--eos-bias", type=float, default=8.5)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    args = parser.parse_args(argv)
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    # One thread: with the cores shared (pytest-xdist's workers), two threads made generate()
    # 16x slower (measured on 2 cores: 6.4 s -> 0.4 s of CPU for 8 greedy steps).
    torch.set_num_threads(1)
    out, times, start = Path(args.out), {}, time.perf_counter()
    folders = {name: out / name for name in FORMATS}
    for folder in folders.values():
        copy_files(args.model, folder)

    config = MarianConfig.from_pretrained(folders["safetensors"])
    torch.manual_seed(args.seed)
    model = MarianMTModel(config).eval()
    randomize(model, args.seed, config.eos_token_id, args.eos_bias, **SCALES)
    times["build"] = time.perf_counter() - start
    model.save_pretrained(folders["safetensors"])
    model.save_pretrained(folders["bin"], safe_serialization=False)
    del model
    from transformers import TFMarianMTModel

    for name in ("safetensors", "bin"):  # the upload's own config, no generation_config.json
        copy_files(args.model, folders[name])
    TFMarianMTModel.from_pretrained(folders["safetensors"], from_pt=True).save_pretrained(
        folders["h5"])
    copy_files(args.model, folders["h5"])
    times["save"] = time.perf_counter() - start - times["build"]

    for name, file in FORMATS.items():
        found = sorted(p.name for p in folders[name].iterdir() if p.suffix in (
            ".safetensors", ".bin", ".h5"))
        if found != [file]:
            raise SystemExit(f"{folders[name]} holds {found}, expected [{file!r}]")
    model = MarianMTModel.from_pretrained(folders["safetensors"]).eval()
    tokenizer = MarianTokenizer.from_pretrained(folders["safetensors"])
    settings, examples = generate(model, tokenizer, SOURCES, args.max_new_tokens)
    settings["bfloat16_autocast_agreement"] = bfloat16_agreement(model, tokenizer, examples)
    times["generate"] = time.perf_counter() - start - times["build"] - times["save"]
    reference = {
        "model": Path(args.model).name, "seed": args.seed, "eos_bias": args.eos_bias,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "numpy": np.__version__},
        "generation": settings, "examples": examples,
        "seconds": {k: round(v, 1) for k, v in times.items()},
    }
    (out / "reference.json").write_text(json.dumps(reference, indent=1, ensure_ascii=False),
                                        encoding="utf-8")
    print(json.dumps(reference["seconds"]))


if __name__ == "__main__":
    main()
