"""Makes the tiny Hugging Face Marian (OPUS-MT layout) fixtures in tests/fixtures/marian/.

The Marian converter (Hugging Face MarianMTModel + MarianTokenizer -> our preset) is tested
without the network and without torch: these small, random models are real `save_pretrained`
checkpoints in OPUS-MT's layout, and reference.json/logits.npz hold what transformers itself
computes with them, so a converted preset can be compared token for token and logit for logit.

What it writes, one folder per configuration under --out (default tests/fixtures/marian):

- shared_swish/       one vocabulary for both sides, encoder/decoder/output embeddings tied
                      (Marian's default, as opus-mt-en-es), activation "swish";
- shared_swish_bin/   the same model as a pickled pytorch_model.bin (torch.save of the whole
                      state_dict in torch's zip format: the static positions and the tied
                      aliases included) with the same tokenizer files; its references are
                      shared_swish's (the script checks that both load to the same logits);
- shared_swish_h5/    the same model as transformers' TensorFlow weights (tf_model.h5, written
                      by TFMarianMTModel.save_pretrained; needs tf-keras next to TensorFlow),
                      with the same tokenizer files; checked to give the same logits;
- separate_gelu/      separate source/target vocabularies (vocab.json + target_vocab.json,
                      `separate_vocabs` in tokenizer_config.json,
                      `share_encoder_decoder_embeddings=False`, as opus-mt-tc-big), "gelu";
- multilingual_relu/  one vocabulary holding the target-language tokens >>es<< and >>fr<<
                      (sources start with ">>es<< ", as opus-mt-en-ROMANCE), "relu".

Each folder has config.json, generation_config.json, model.safetensors (or pytorch_model.bin),
source.spm, target.spm, vocab.json (+ target_vocab.json), tokenizer_config.json,
special_tokens_map.json, and (not in *_bin) reference.json + logits.npz. reference.json has,
for a padded batch of fixed sources: the source pieces and ids, the target ids, the model's
float32 logits for teacher forcing (logits.npz, every position, the whole vocabulary), the
greedy and beam-4 outputs (beam-4 with the generation config's length penalty, 1.0, and
without one) as ids and text with the beams' scores, the generation settings, the
versions, and "notes": what the converter must reproduce (read from modeling_marian.py and
generation/utils.py of the transformers version below).

How the files differ from a real OPUS-MT download, on purpose:
- every weight is random and decisive (embeddings std 0.4, random biases, LayerNorm gains of
  random sign, a random final_logits_bias, a non-zero <pad> row), so a converter that drops a
  bias, swaps a LayerNorm, zeroes the <pad>/decoder-start embedding or ignores
  final_logits_bias fails, and no greedy step is within 3e-3 of a tie;
- the SentencePiece models normalize with a 3-rule subset of nmt_nfkc (NBSP -> space,
  fullwidth "!" -> "!", the "fi" ligature -> "fi"): the full nmt_nfkc table is 240 KB a file,
  and a small non-empty table still proves the converter keeps the model's normalizer.

Run it (in an environment with torch, transformers, sentencepiece, safetensors, numpy; not the
project's):
    python3 -m venv /work/hf-venv
    /work/hf-venv/bin/pip install torch==2.13.0 transformers sentencepiece safetensors numpy
    /work/hf-venv/bin/python tools/make_marian_fixtures.py [--out tests/fixtures/marian]
shared_swish_h5 needs transformers 4.x with tf-keras: tests/interop.py installs such an
environment (`PYTHONPATH=$(python -m tests.interop):. python tools/make_marian_fixtures.py`).

The committed files were made with torch 2.13.0+cpu, transformers 5.25.0, sentencepiece 0.2.3,
safetensors 0.8.0, numpy 2.4.6 (Python 3.11); tests/convert/test_marian_fixtures_regenerate.py
re-runs this script and compares (it skips where torch or transformers is missing).
"""

import argparse
import collections
import io
import json
import math
import os
import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np
import sentencepiece
import torch
import transformers
from transformers import GenerationConfig, MarianConfig, MarianMTModel, MarianTokenizer

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO_ROOT / "tests" / "fixtures" / "marian"

# Parallel training sentences: English, Spanish, and French for the first 20 (the
# multilingual configuration's second target language).
EN = [
    "The cat sleeps on the red chair.", "I like green apples.",
    "We walk to the old house every day.", "She reads a small book.", "The dog is in the garden.",
    "My brother drinks cold water.", "The children play in the park.", "He opens the window.",
    "The sun is very hot today.", "They eat bread and cheese.", "My sister has a blue car.",
    "The teacher writes on the board.", "We need more time.", "The house has three rooms.",
    "I see the moon at night.", "The bird sings in the tree.", "You speak very well.",
    "The water is cold.", "My father works in the city.", "The book is on the table.",
    "She buys fresh fruit.", "The train arrives at noon.", "I have two cats.", "The door is open.",
    "We listen to music.", "The coffee is very good.", "He runs in the morning.",
    "The flowers are red and white.", "My mother cooks dinner.", "The street is long.",
    "They live near the sea.", "I want a glass of milk.", "The boy reads the newspaper.",
    "We go to school by bus.", "The old man sits on the bench.", "She writes a long letter.",
    "The rain falls on the roof.", "I do not know the answer.", "The shop opens at nine.",
    "Good night, my friend!",
]
ES = [
    "El gato duerme en la silla roja.", "Me gustan las manzanas verdes.",
    "Caminamos a la casa vieja cada día.", "Ella lee un libro pequeño.",
    "El perro está en el jardín.", "Mi hermano bebe agua fría.", "Los niños juegan en el parque.",
    "Él abre la ventana.", "El sol está muy caliente hoy.", "Ellos comen pan y queso.",
    "Mi hermana tiene un coche azul.", "El profesor escribe en la pizarra.",
    "Necesitamos más tiempo.", "La casa tiene tres habitaciones.", "Veo la luna por la noche.",
    "El pájaro canta en el árbol.", "Tú hablas muy bien.", "El agua está fría.",
    "Mi padre trabaja en la ciudad.", "El libro está en la mesa.", "Ella compra fruta fresca.",
    "El tren llega al mediodía.", "Tengo dos gatos.", "La puerta está abierta.",
    "Escuchamos música.", "El café es muy bueno.", "Él corre por la mañana.",
    "Las flores son rojas y blancas.", "Mi madre cocina la cena.", "La calle es larga.",
    "Ellos viven cerca del mar.", "Quiero un vaso de leche.", "El chico lee el periódico.",
    "Vamos a la escuela en autobús.", "El hombre viejo se sienta en el banco.",
    "Ella escribe una carta larga.", "La lluvia cae sobre el techo.", "No sé la respuesta.",
    "La tienda abre a las nueve.", "¡Buenas noches, mi amigo!",
]
FR = [
    "Le chat dort sur la chaise rouge.", "J'aime les pommes vertes.",
    "Nous marchons vers la vieille maison chaque jour.", "Elle lit un petit livre.",
    "Le chien est dans le jardin.", "Mon frère boit de l'eau froide.",
    "Les enfants jouent dans le parc.", "Il ouvre la fenêtre.",
    "Le soleil est très chaud aujourd'hui.", "Ils mangent du pain et du fromage.",
    "Ma sœur a une voiture bleue.", "Le professeur écrit au tableau.",
    "Nous avons besoin de plus de temps.", "La maison a trois pièces.", "Je vois la lune la nuit.",
    "L'oiseau chante dans l'arbre.", "Tu parles très bien.", "L'eau est froide.",
    "Mon père travaille en ville.", "Le livre est sur la table.",
]

# A 3-rule subset of SentencePiece's nmt_nfkc (source code points -> target code points).
NORMALIZATION_RULES = "00A0\t0020\nFF01\t0021\nFB01\t0066 0069\n"
SPM_SIZES = {"en": 64, "es": 64, "es_fr": 80}

# (source, target) pairs, the sources translated in one padded batch: one from the training
# data, one longer with a doubled space, one with unseen words and every normalization rule
# (NBSP, fullwidth "!", the "fi" ligature), one with characters neither SentencePiece model
# knows (they become <unk>), and the empty sentence. The targets (teacher forcing for the
# logits) are short to keep logits.npz small.
PAIRS = [
    ("The cat sleeps on the red chair.", "El gato duerme."),
    ("My sister reads  the old book in the garden.", "Mi hermana lee el libro."),
    ("The \ufb01sh\u00a0swims in the lake\uff01", "El pez nada!"),
    ("Zoë eats crème brûlée.", "Zoë come crème."),
    ("", ""),
]
MULTILINGUAL_PAIRS = [
    (">>es<< The cat sleeps on the red chair.", "El gato duerme."),
    (">>fr<< The cat sleeps on the red chair.", "Le chat dort."),
    (">>es<< My sister reads the old book in the garden.", "Mi hermana lee el libro."),
    (">>fr<< The \ufb01sh\u00a0swims in the lake\uff01", "Le poisson nage!"),
    (">>es<<", ""),
    ("", ""),
]

MODEL = dict(
    d_model=16, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
    decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32,
    max_position_embeddings=64, scale_embedding=True,
)
# Weight scales: 0.4 for the token embeddings (init_std), and gain / sqrt(fan_in) for the
# Linear layers: weak self-attention, strong cross-attention and FFN, so that the output
# depends on the source and on the previous tokens without settling on one token.
EMBEDDING_STD = 0.4
GAINS = {"attention": 0.2, "cross": 1.0, "ffn": 1.0}
# Each configuration's `seed` and `eos_bias` were searched for so that `check_varied` passes.
CONFIGURATIONS = {
    "shared_swish": dict(activation="swish", separate=False, target="es", seed=1, eos_bias=3.0),
    "separate_gelu": dict(activation="gelu", separate=True, target="es", seed=22, eos_bias=4.0),
    "multilingual_relu": dict(
        activation="relu", separate=False, target="es_fr", seed=529, eos_bias=3.0),
}
MAX_NEW_TOKENS = 20
# Beam searches recorded: with the generation config's length penalty (1.0), and without one
# (a score that is the plain sum of log-probabilities, for a search whose length penalty
# differs from transformers' where alpha is not 0).
BEAM_KINDS = {"beam": {}, "beam_no_length_penalty": {"length_penalty": 0.0}}
GENERATION_MAX_LENGTH = 32
SPECIAL_TOKENS = {"eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}

NOTES = {
    "positions": (
        "Static sinusoidal, not learned and not saved in model.safetensors "
        "(MarianMTModel._keys_to_ignore_on_save; the pickled pytorch_model.bin has them as "
        "model.{encoder,decoder}.embed_positions.weight). Row p, dim d (even): "
        "angle_j = p / 10000**(2*j/d) for j in 0..d/2-1; the row is "
        "concat(sin(angle_0..angle_{d/2-1}), cos(angle_0..angle_{d/2-1})): concatenated "
        "halves, sin first, NOT interleaved. Positions start at 0 for the first token "
        "(no offset, no padding_idx shift, unlike BART's +2); the decoder start token is "
        "position 0; with a cache, step t uses position t. Computed in float64 numpy, "
        "stored float32; table size max_position_embeddings."
    ),
    "embeddings": (
        "token embedding * sqrt(d_model) (scale_embedding=True; sqrt(16)=4 here) + position; "
        "no LayerNorm on the embeddings (no layernorm_embedding), dropout only in training. "
        "Encoder and decoder both scale. The <pad> row (the decoder start token's "
        "embedding) is random and non-zero here: nn.Embedding's padding_idx only zeroes it "
        "at init (real OPUS-MT conversions have it zero), the forward pass uses it as is."
    ),
    "layers": (
        "Post-norm (x = LayerNorm(x + sublayer(x)), eps 1e-5) after self-attention, "
        "cross-attention and the FFN; no final LayerNorm after the last layer of either "
        "stack. Attention: separate q/k/v/out Linear with biases, q scaled by "
        "head_dim**-0.5 (via scaling inside softmax(q k^T * scaling)). FFN: fc2(act(fc1(x))). "
        "Activations: 'swish' = SiLU x*sigmoid(x), 'gelu' = exact erf GELU, 'relu'. "
        "torch Linear stores weight as [out, in] (y = x W^T + b)."
    ),
    "output": (
        "logits = decoder_output @ lm_head.weight^T + final_logits_bias (shape [1, vocab], "
        "a buffer, added after the projection, in the raw forward pass too). lm_head is tied "
        "to the decoder embedding (tie_word_embeddings=True); with "
        "share_encoder_decoder_embeddings=True all three are model.shared.weight and "
        "model.safetensors stores model.shared.weight once (the tied aliases are absent); "
        "with separate embeddings it stores model.encoder.embed_tokens.weight and "
        "model.decoder.embed_tokens.weight, and no lm_head.weight."
    ),
    "masks": (
        "Encoder self-attention and decoder cross-attention use the source attention_mask "
        "(padding = 0, right padding); decoder self-attention is causal. The logits in "
        "logits.npz come from one batch: sources right-padded with <pad> (batch.input_ids, "
        "batch.attention_mask), decoder inputs [start] + target_ids[:-1] right-padded with "
        "<pad> and no decoder mask; rows past a sentence's decoder length are not stored. "
        "The same sentence run alone gives logits up to ~2.4e-6 apart (float32 summation "
        "order): compare a converted model with atol ~1e-5, not 1e-6."
    ),
    "pad_logit": (
        "The raw forward pass does NOT mask <pad>: logits.npz has its real value. During "
        "generate, generation_config.bad_words_ids=[[pad]] (NoBadWordsLogitsProcessor) sets "
        "the <pad> score to -inf at every step; transformers 5 has no Marian "
        "adjust_logits_during_generation any more (older versions set logits[:, pad] = -inf "
        "there). forced_eos_token_id=eos forces </s> at the last step allowed by max_length "
        "(cur_len == max_length - 1, all other scores -inf)."
    ),
    "greedy": (
        "Start from [decoder_start_token_id] (= pad), take argmax of the processed logits "
        "each step, stop a sentence at </s> (later positions filled with pad), at most "
        "max_new_tokens new tokens (max_length = 1 + max_new_tokens; the last one forced to "
        "</s>). 'tokens' (greedy and beam) are generate()'s sequence without the leading "
        "start token, up to and including </s>."
    ),
    "beam_scores": (
        "Per step: log_probs = log_softmax(logits) over the whole vocabulary, THEN the logits "
        "processors run on the log-probs (bad_words -inf on <pad>, forced EOS), then, "
        "because generation_config.renormalize_logits is true (as in OPUS-MT's "
        "generation_config.json), log_softmax again. Beam score = running sum of these "
        "log-probs. A hypothesis that ends with </s> is scored "
        "sum_logprobs / (n ** length_penalty), n = number of generated tokens including the "
        "</s> and excluding the decoder start token (cur_len + 1 - decoder_prompt_len). "
        "length_penalty 0 ('beam_no_length_penalty') makes it the plain sum. "
        "sequences_scores is that value for the returned beam (recomputing it from "
        "teacher-forced logits this way matches to ~1e-5). Per step: the top 2*num_beams "
        "(beam, token) candidates by running sum (no length penalty; at the first step only "
        "beam 0 is live); those among the first num_beams that end in </s> (or reach "
        "max_length) are offered to the num_beams finished slots, scored with the length "
        "penalty; the best num_beams candidates that did not finish continue."
    ),
    "early_stopping": (
        "early_stopping=False (default, OPUS-MT sets none): the search continues while the "
        "best running beam's score divided by (cur_len - decoder_prompt_len)**length_penalty "
        "could still beat the worst of the num_beams finished hypotheses, i.e. it ends when "
        "all num_beams finished slots are filled and that heuristic says no improvement, or at "
        "max_length. Hypotheses cut by max_length (forced </s>) count as finished. "
        "early_stopping=True ends a sentence as soon as num_beams hypotheses are finished; "
        "'never' uses max_length in the bound when length_penalty > 0."
    ),
    "tokenizer": (
        "MarianTokenizer: a leading '>>xx<<' code is split off before SentencePiece and looked "
        "up in vocab.json as one token; the rest goes through source.spm (pieces as strings), "
        "each piece looked up in vocab.json (Marian ids, NOT the SentencePiece ids), unknown "
        "pieces -> <unk>; '</s>' appended; the empty string gives just [</s>]. Targets "
        "(text_target=) use target.spm and, with separate_vocabs, target_vocab.json. Marian "
        "vocab: '</s>': 0, '<unk>': 1, pieces by corpus frequency, '<pad>' last "
        "(= vocab_size - 1). Decoding maps ids back through the target vocabulary, drops "
        "special tokens with skip_special_tokens=True (</s>, <pad>, <unk>), joins the pieces "
        "with the SentencePiece model (the SOURCE one when the vocabulary is shared: "
        "use_source_tokenizer defaults to not separate_vocabs), replaces '▁' by spaces and "
        "strips. sacremoses was not installed: no Moses punctuation normalization ran."
    ),
}


def spm_model(sentences, vocab_size):
    """Trains a unigram SentencePiece model like OPUS-MT's source.spm/target.spm: <unk>=0,
    <s>=1, </s>=2, no pad piece, no byte fallback, full character coverage (single-threaded
    with a fixed seed, so the bytes are the same every run; the model records the rule
    file's path, so it is read as a relative name from a temporary working directory)."""
    sentencepiece.set_random_generator_seed(1234)
    model = io.BytesIO()
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as work:
        try:
            os.chdir(work)
            Path("rules.tsv").write_text(NORMALIZATION_RULES, encoding="utf-8")
            sentencepiece.SentencePieceTrainer.train(
                sentence_iterator=iter(sentences), model_writer=model, model_type="unigram",
                vocab_size=vocab_size, character_coverage=1.0, byte_fallback=False,
                unk_id=0, bos_id=1, eos_id=2, pad_id=-1, normalization_rule_tsv="rules.tsv",
                num_threads=1, minloglevel=2,
            )
        finally:
            os.chdir(here)
    return model.getvalue()


def piece_counts(model_bytes, sentences):
    """How often each piece of the model occurs in the encoded corpus (every piece of the
    model is counted, unused ones with 0)."""
    processor = sentencepiece.SentencePieceProcessor(model_proto=model_bytes)
    counts = collections.Counter()
    for i in range(processor.get_piece_size()):
        if not (processor.is_unknown(i) or processor.is_control(i)):
            counts[processor.id_to_piece(i)] += 0
    for sentence in sentences:
        counts.update(processor.encode(sentence, out_type=str))
    return counts


def marian_vocab(counts):
    """Marian's vocabulary layout: '</s>' 0, '<unk>' 1, then pieces by frequency (ties by
    piece), and the converter's '<pad>' last."""
    pieces = sorted(counts, key=lambda piece: (-counts[piece], piece))
    vocab = {"</s>": 0, "<unk>": 1}
    for piece in pieces:
        vocab.setdefault(piece, len(vocab))
    vocab["<pad>"] = len(vocab)
    return vocab


def to_json(value, indent=""):
    """Indented JSON with each list of plain values on one line (reference.json holds many
    id lists: one number a line would triple its size)."""
    inner = indent + "  "
    if isinstance(value, dict) and value:
        items = [f"{inner}{json.dumps(k, ensure_ascii=False)}: {to_json(v, inner)}"
                 for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{indent}}}"
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        return "[\n" + ",\n".join(inner + to_json(v, inner) for v in value) + f"\n{indent}]"
    return json.dumps(value, ensure_ascii=False)


def write_json(path, data):
    path.write_text(to_json(data) + "\n", encoding="utf-8")


def write_tokenizer(folder, spms, vocabs, separate, target_lang):
    """The tokenizer files of an OPUS-MT repository, written as the hub has them."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "source.spm").write_bytes(spms[0])
    (folder / "target.spm").write_bytes(spms[1])
    # As MarianTokenizer.save_vocabulary writes them (json.dump, indent 2, ASCII escapes).
    (folder / "vocab.json").write_text(json.dumps(vocabs[0], indent=2), encoding="utf-8")
    if separate:
        (folder / "target_vocab.json").write_text(json.dumps(vocabs[1], indent=2),
                                                  encoding="utf-8")
    write_json(folder / "tokenizer_config.json", {
        "source_lang": "en", "target_lang": target_lang, "separate_vocabs": separate,
        "model_max_length": MODEL["max_position_embeddings"], "sp_model_kwargs": {},
        **SPECIAL_TOKENS, "tokenizer_class": "MarianTokenizer",
    })
    write_json(folder / "special_tokens_map.json", SPECIAL_TOKENS)


def randomize(model, seed, eos_id, eos_bias, embedding_std=EMBEDDING_STD, gains=GAINS,
              bias_std=0.2, logits_bias_std=1.0):
    """Decisive random weights, every parameter drawn again: the biases and LayerNorms too
    (transformers sets them to 0 and 1) and the <pad> rows (it zeroes them). LayerNorm gains
    are N(0, 1), random in sign: with gains near 1 the tied output projection favours the
    previous token and greedy search repeats one token. Attention and FFN weights are
    N(0, gain**2 / fan_in). final_logits_bias is N(0, 1) with `eos_bias` added to </s>, so that
    sentences end, at mixed lengths. (The other arguments change these scales: the defaults are
    the fixtures'; tools/marian_interop_reference.py sets its own for a 512-d model.)"""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "embed_positions" in name:
                continue
            noise = torch.randn(parameter.shape, generator=generator)
            if "layer_norm" in name and name.endswith("weight"):
                parameter.copy_(noise)
            elif name.endswith("bias"):
                parameter.copy_(bias_std * noise)
            elif "embed_tokens" in name or "shared" in name:
                parameter.copy_(embedding_std * noise)
            else:
                gain = gains["cross" if "encoder_attn" in name else
                             "ffn" if ".fc" in name else "attention"]
                parameter.copy_(gain / math.sqrt(parameter.shape[1]) * noise)
        bias = logits_bias_std * torch.randn(model.final_logits_bias.shape, generator=generator)
        bias[0, eos_id] += eos_bias
        model.final_logits_bias.copy_(bias)


def build_model(vocab_size, decoder_vocab_size, pad_id, spec):
    config = MarianConfig(
        vocab_size=vocab_size, decoder_vocab_size=decoder_vocab_size, **MODEL,
        activation_function=spec["activation"], init_std=EMBEDDING_STD,
        share_encoder_decoder_embeddings=not spec["separate"], tie_word_embeddings=True,
        pad_token_id=pad_id, eos_token_id=0, bos_token_id=0, forced_eos_token_id=0,
        decoder_start_token_id=pad_id, dropout=0.1, attention_dropout=0.0,
        activation_dropout=0.0,
    )
    config._attn_implementation = "eager"
    torch.manual_seed(spec["seed"])
    model = MarianMTModel(config)
    randomize(model, spec["seed"], 0, spec["eos_bias"])
    model.generation_config = GenerationConfig(
        bad_words_ids=[[pad_id]], bos_token_id=0, decoder_start_token_id=pad_id,
        eos_token_id=0, forced_eos_token_id=0, max_length=GENERATION_MAX_LENGTH, num_beams=4,
        pad_token_id=pad_id, renormalize_logits=True,
    )
    return model.eval()


def trim(ids, eos_id):
    """The generated tokens: without the leading decoder start token, up to and with </s>."""
    out = []
    for token in ids[1:]:
        out.append(token)
        if token == eos_id:
            break
    return out


def margin(scores, row, steps):
    """The smallest gap between the best and the second-best processed score along a greedy
    path: how far the references are from a tie a float error could flip."""
    gaps = [float(step[row].topk(2).values[0] - step[row].topk(2).values[1])
            for step in scores[:steps]]
    return round(min(gaps), 4)


def describe(model, tokenizer, spec):
    """The versions, the model's shape and the special ids, for reference.json."""
    config = model.config
    return {
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "sentencepiece": sentencepiece.__version__, "numpy": np.__version__},
        "model": {
            "activation_function": config.activation_function, "d_model": config.d_model,
            "encoder_layers": config.encoder_layers, "decoder_layers": config.decoder_layers,
            "attention_heads": config.encoder_attention_heads,
            "ffn_dim": config.encoder_ffn_dim,
            "max_position_embeddings": config.max_position_embeddings,
            "scale_embedding": config.scale_embedding,
            "share_encoder_decoder_embeddings": config.share_encoder_decoder_embeddings,
            "tie_word_embeddings": config.tie_word_embeddings,
            "vocab_size": config.vocab_size, "decoder_vocab_size": config.decoder_vocab_size,
        },
        "tokens": {
            "separate_vocabs": spec["separate"], "pad_id": tokenizer.pad_token_id,
            "eos_id": tokenizer.eos_token_id, "unk_id": tokenizer.unk_token_id,
            "decoder_start_id": config.decoder_start_token_id,
            "source_vocab_size": len(tokenizer.encoder),
            "target_vocab_size": len(tokenizer.target_encoder if spec["separate"]
                                     else tokenizer.encoder),
            "language_codes": tokenizer.supported_language_codes,
        },
    }


def references(folder, model, tokenizer, pairs, spec, name):
    """Runs transformers on one padded batch and writes reference.json and logits.npz."""
    sources = [source for source, _ in pairs]
    targets = [target for _, target in pairs]
    batch = tokenizer(sources, padding=True, return_tensors="pt")
    target_ids = [tokenizer(text_target=target)["input_ids"] for target in targets]
    start = model.config.decoder_start_token_id
    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    decoder_inputs = [[start] + ids[:-1] for ids in target_ids]
    width = max(len(ids) for ids in decoder_inputs)
    decoder_batch = torch.tensor([ids + [pad] * (width - len(ids)) for ids in decoder_inputs])
    with torch.no_grad():
        logits = model(**batch, decoder_input_ids=decoder_batch).logits.float().numpy()
        greedy_out = model.generate(
            **batch, num_beams=1, do_sample=False, max_new_tokens=MAX_NEW_TOKENS,
            output_scores=True, return_dict_in_generate=True)
        greedy = greedy_out.sequences
        beams = {kind: model.generate(
            **batch, num_beams=4, do_sample=False, max_new_tokens=MAX_NEW_TOKENS,
            num_return_sequences=1, output_scores=True, return_dict_in_generate=True, **extra)
            for kind, extra in BEAM_KINDS.items()}
    greedy_ids = greedy.tolist()
    greedy_text = tokenizer.batch_decode(greedy, skip_special_tokens=True)
    beam_text = {kind: tokenizer.batch_decode(out.sequences, skip_special_tokens=True)
                 for kind, out in beams.items()}
    arrays, examples = {}, []
    for i, (source, target) in enumerate(pairs):
        key = f"logits_{i}"
        arrays[key] = logits[i, : len(decoder_inputs[i])].astype(np.float32)
        examples.append({
            "source": source,
            "source_pieces": tokenizer.tokenize(source),
            "source_ids": [t for t, m in zip(batch["input_ids"][i].tolist(),
                                             batch["attention_mask"][i].tolist()) if m],
            "target": target,
            "target_pieces": tokenizer.spm_target.encode(target, out_type=str),
            "target_ids": target_ids[i],
            "decoder_input_ids": decoder_inputs[i],
            "logits_key": key,
            "greedy": {"tokens": trim(greedy_ids[i], eos),
                       "text": greedy_text[i],
                       "min_margin": margin(greedy_out.scores, i, len(trim(greedy_ids[i], eos)))},
            **{kind: {"tokens": trim(out.sequences[i].tolist(), eos), "text": beam_text[kind][i],
                      "score": float(out.sequences_scores[i])} for kind, out in beams.items()},
        })
    # The settings generate() used: generation_config.json's, else transformers' defaults.
    generation = model.generation_config
    defaults = GenerationConfig._get_default_generation_params()
    settings = {"max_new_tokens": MAX_NEW_TOKENS, "max_length_used": 1 + MAX_NEW_TOKENS}
    for key in ("do_sample", "length_penalty", "early_stopping", "no_repeat_ngram_size",
                "repetition_penalty", "min_length", "renormalize_logits", "bad_words_ids",
                "forced_eos_token_id", "decoder_start_token_id", "use_cache"):
        value = getattr(generation, key)
        settings[key] = defaults.get(key) if value is None else value
    reference = {
        "configuration": name,
        **describe(model, tokenizer, spec),
        "batch": {"input_ids": batch["input_ids"].tolist(),
                  "attention_mask": batch["attention_mask"].tolist(),
                  "padding_side": tokenizer.padding_side},
        "generation": {"greedy": {**settings, "num_beams": 1}, **{
            kind: {**settings, "num_beams": 4, "num_return_sequences": 1, **extra}
            for kind, extra in BEAM_KINDS.items()}},
        "examples": examples,
        "notes": NOTES,
    }
    write_json(folder / "reference.json", reference)
    np.savez_compressed(folder / "logits.npz", **arrays)
    return reference


def check_varied(reference):
    """Fails unless the random model's outputs are worth comparing: greedy outputs of mixed
    lengths (at least 3 lengths, at most one under 3 tokens, at most one cut by max_length),
    one with 4 or more distinct tokens, nearly all different, beam search different from greedy
    somewhere, and no greedy step within 3e-3 of a tie."""
    examples = reference["examples"]
    greedy = [e["greedy"]["tokens"] for e in examples]
    lengths = [len(tokens) for tokens in greedy]
    problems = []
    if (len(set(lengths)) < 3 or sum(n < 3 for n in lengths) > 1
            or lengths.count(MAX_NEW_TOKENS) > 1):
        problems.append(f"greedy lengths {lengths}")
    if max(len(set(tokens)) for tokens in greedy) < 4:
        problems.append("greedy outputs repeat few tokens")
    if len({tuple(tokens) for tokens in greedy}) < len(greedy) - 1:
        problems.append("greedy outputs are alike")
    if all(e["greedy"]["tokens"] == e["beam"]["tokens"] for e in examples):
        problems.append("beam search equals greedy everywhere")
    if min(e["greedy"]["min_margin"] for e in examples) < 3e-3:
        problems.append("a greedy step is near a tie")
    if problems:
        raise SystemExit(f"{reference['configuration']}: {'; '.join(problems)}: {greedy}")


def save_bin_copy(model, folder, source):
    """The pickled checkpoint of the older uploads (torch.save of the whole state_dict), next
    to the same tokenizer files; checks transformers loads it to the same logits."""
    folder.mkdir(parents=True, exist_ok=True)
    for path in source.iterdir():
        if path.name not in ("model.safetensors", "reference.json", "logits.npz"):
            shutil.copyfile(path, folder / path.name)
    torch.save(model.state_dict(), folder / "pytorch_model.bin")
    loaded = MarianMTModel.from_pretrained(folder, attn_implementation="eager").eval()
    ids = torch.tensor([[5, 6, 7, 0]])
    start = torch.tensor([[model.config.decoder_start_token_id, 5, 6]])
    with torch.no_grad():
        same = torch.equal(model(input_ids=ids, decoder_input_ids=start).logits,
                           loaded(input_ids=ids, decoder_input_ids=start).logits)
    if not same:
        raise SystemExit("pytorch_model.bin does not load back to the same model")


def save_h5_copy(folder, source):
    """transformers' TensorFlow checkpoint (tf_model.h5, Keras' HDF5 weights layout) of the
    model in `source`, next to the same tokenizer files; checks TFMarianMTModel gives the
    PyTorch model's logits (within 1e-4: TensorFlow's kernels round differently)."""
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # transformers' TF models need tf-keras
    try:
        from transformers import TFMarianMTModel
    except ImportError:  # transformers 5 has no TensorFlow models: the folder is left as it is
        print(f"{folder.name}: not remade (needs transformers < 5 with TensorFlow and tf-keras)")
        return
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for path in source.iterdir():
        if path.name not in ("model.safetensors", "reference.json", "logits.npz"):
            shutil.copyfile(path, folder / path.name)
    TFMarianMTModel.from_pretrained(source, from_pt=True).save_pretrained(folder)
    for name in ("config.json", "generation_config.json"):  # (as the source's, not rewritten)
        shutil.copyfile(source / name, folder / name)
    loaded = TFMarianMTModel.from_pretrained(folder)
    model = MarianMTModel.from_pretrained(source, attn_implementation="eager").eval()
    ids, start = [[5, 6, 7, 0]], [[model.config.decoder_start_token_id, 5, 6]]
    with torch.no_grad():
        expected = model(input_ids=torch.tensor(ids),
                         decoder_input_ids=torch.tensor(start)).logits.numpy()
    got = loaded(input_ids=np.array(ids), decoder_input_ids=np.array(start)).logits.numpy()
    if not np.allclose(got, expected, atol=1e-4, rtol=0):
        raise SystemExit("tf_model.h5 does not load back to the same model")


def make(out):
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    warnings.filterwarnings("ignore", message="Recommended: pip install sacremoses")
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    out.mkdir(parents=True, exist_ok=True)
    spms = {"en": spm_model(EN, SPM_SIZES["en"]), "es": spm_model(ES, SPM_SIZES["es"]),
            "es_fr": spm_model(ES + FR, SPM_SIZES["es_fr"])}
    codes = [">>es<<"] * len(ES) + [">>fr<<"] * len(FR)
    corpora = {"en": EN, "es": ES, "es_fr": ES + FR}
    for name, spec in CONFIGURATIONS.items():
        folder = out / name
        if folder.exists():
            shutil.rmtree(folder)
        target = spec["target"]
        source_counts = piece_counts(spms["en"], EN + (EN[: len(FR)] if target == "es_fr" else []))
        target_counts = piece_counts(spms[target], corpora[target])
        if spec["separate"]:
            vocabs = (marian_vocab(source_counts), marian_vocab(target_counts))
            if len(vocabs[0]) != len(vocabs[1]):
                raise SystemExit(f"{name}: source and target vocabularies differ in size")
        else:
            shared = source_counts + target_counts
            if target == "es_fr":
                for code in codes:
                    shared[code] += 1
            vocabs = (marian_vocab(shared),) * 2
        write_tokenizer(folder, (spms["en"], spms[target]), vocabs, spec["separate"],
                        target.replace("_", "+"))
        tokenizer = MarianTokenizer.from_pretrained(folder)
        pad = vocabs[0]["<pad>"]
        if tokenizer.pad_token_id != pad or tokenizer.eos_token_id != 0:
            raise SystemExit(f"{name}: tokenizer special ids do not match the vocabulary")
        model = build_model(len(vocabs[0]), len(vocabs[1]), pad, spec)
        model.save_pretrained(folder)
        model = MarianMTModel.from_pretrained(folder, attn_implementation="eager").eval()
        pairs = MULTILINGUAL_PAIRS if target == "es_fr" else PAIRS
        reference = references(folder, model, tokenizer, pairs, spec, name)
        check_varied(reference)
        if name == "shared_swish":
            bin_folder = out / "shared_swish_bin"
            if bin_folder.exists():
                shutil.rmtree(bin_folder)
            save_bin_copy(model, bin_folder, folder)
            save_h5_copy(out / "shared_swish_h5", folder)
        print(f"{name}: vocab {len(vocabs[0])}/{len(vocabs[1])}, pad {pad}")
        for example in reference["examples"]:
            print(f"  {example['source']!r}: greedy {example['greedy']['tokens']} "
                  f"beam {example['beam']['tokens']}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="folder to write the configurations into (default: %(default)s)")
    make(parser.parse_args().out)


if __name__ == "__main__":
    main()
