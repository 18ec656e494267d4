"""The converter on real OPUS-MT files (tests/data/opus_mt/: the
configuration, SentencePiece and vocabulary files of Helsinki-NLP's
opus-mt-en-mg and opus-mt-tc-big-en-pt, no weights): their configs give the
real shapes, their generation defaults are read where transformers reads
them (an old config.json; a generation_config.json), and a multilingual
model's target-language tokens (`>>por<<`) are one token each. No
PyTorch and no weights here (tests/convert/test_interop.py compares
transformers' own outputs on random weights of opus-mt-en-mg's shapes)."""

import gzip
import pathlib
import re
import shutil

import pytest

from keras_attention.convert import marian

DATA = pathlib.Path(__file__).resolve().parents[1] / "data" / "opus_mt"
MODELS = ("opus-mt-en-mg", "opus-mt-tc-big-en-pt")


def unpacked(name, folder):
    """A copy of `name`'s files in `folder`, vocab.json unpacked."""
    folder.mkdir(parents=True, exist_ok=True)
    for path in (DATA / name).iterdir():
        if path.name.endswith(".gz"):
            (folder / path.name[:-3]).write_bytes(gzip.decompress(path.read_bytes()))
        else:
            shutil.copyfile(path, folder / path.name)
    return folder


@pytest.fixture(scope="module", params=MODELS)
def model(request, tmp_path_factory):
    folder = unpacked(request.param, tmp_path_factory.mktemp(request.param))
    config, vocabularies, generation, tokenizer = marian.read_marian_folder(str(folder))
    return request.param, folder, config, vocabularies, generation


def test_the_real_configs_give_the_real_shapes(model):
    name, folder, config, vocabularies, generation = model
    arguments = marian.transformer_arguments(config, vocabularies, str(folder))
    expected = {"opus-mt-en-mg": (512, 8, 2048, "silu", 54688),
                "opus-mt-tc-big-en-pt": (1024, 16, 4096, "relu", 54776)}[name]
    # (ours: Marian's 3 specials are [PAD] [UNK] [END], and [START] is one more)
    assert (arguments["d_model"], arguments["num_heads"], arguments["intermediate_dim"],
            arguments["activation"], arguments["encoder_vocabulary_size"] - 1) == expected
    assert arguments["share_encoder_decoder_embeddings"]


def test_generation_defaults_are_read_where_transformers_reads_them(model):
    """opus-mt-en-mg's old config.json holds them (no generation_config.json);
    opus-mt-tc-big-en-pt has a generation_config.json. Both ban `<pad>`."""
    name, folder, config, vocabularies, generation = model
    fields, file = marian.generation_defaults(generation, config, str(folder))
    settings = marian.decoding_settings(generation, config, config["max_position_embeddings"],
                                        str(folder))
    assert file == {"opus-mt-en-mg": "config.json",
                    "opus-mt-tc-big-en-pt": "generation_config.json"}[name]
    assert settings["beam_size"] == 4 and settings["max_output_length"] == 511
    assert settings["length_penalty"] == 1.0
    assert marian.never_generated(fields, vocabularies[1]) == [vocabularies[1].pad_id]


def test_target_language_tokens_are_one_token(tmp_path):
    """`>>por<<` and `>>pob<<` of opus-mt-tc-big-en-pt: one id each, as
    transformers' MarianTokenizer reads them."""
    from keras_attention.data.marian_tokenizer import LANGUAGE_CODE_PATTERN, MarianTokenizer

    folder = unpacked("opus-mt-tc-big-en-pt", tmp_path / "m")
    source = marian.read_marian_folder(str(folder))[1][0]
    tokenizer = MarianTokenizer((folder / "source.spm").read_bytes(), source.tokens)
    codes = [t for t in source.tokens if re.fullmatch(LANGUAGE_CODE_PATTERN, t)]
    assert codes == [">>pob<<", ">>por<<"]
    for code in codes:
        ids = tokenizer.tokenize([f"{code} Hello world"]).to_list()[0]
        assert ids[0] == source.tokens.index(code) and len(ids) > 1
        assert source.tokens.index(code) not in ids[1:]
