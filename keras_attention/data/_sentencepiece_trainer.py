"""The one call of SentencePiece's native trainer (`learn_model`), whose
refusals of a vocabulary size become ValueErrors that name the size
received and the one this text allows.

SentencePiece raises a RuntimeError carrying a C++ check's text when the
size does not fit the text: below the text's characters plus the reserved
tokens ("Vocabulary size is smaller than required_chars. 10 vs 35"), and,
where it must reach the size exactly, above what the text can give
("Vocabulary size too high (8000). Please set it to a value <= 28").
"""

import io
import os
import re
import shutil
import tempfile

from keras_attention._constants import END_ID, PAD_ID, RESERVED_TOKENS, START_ID, UNK_ID

# The trainer's own words (src/trainer_interface.cc), with the numbers it gives.
_TOO_SMALL = re.compile(r"Vocabulary size is smaller than required_chars\. (\d+) vs (\d+)")
_TOO_HIGH = re.compile(r"Vocabulary size too high \((\d+)\)\. Please set it to a value <= (\d+)")
_FLAG = "vocabulary_size (train.py's --vocabulary-size)"


def learn_model(sentences, vocabulary_size, model_type, name=None):
    """The serialized SentencePiece `ModelProto` (bytes) of a `model_type`
    ("unigram" or "bpe") model of at most `vocabulary_size` pieces learned
    from `sentences` (normalized Python strings), the first four
    `RESERVED_TOKENS`. A size the text cannot take raises ValueError
    (`vocabulary_error`, naming the vocabulary `name`: "source", ...)."""
    import sentencepiece
    from sentencepiece import sentencepiece_model_pb2

    model = io.BytesIO()
    # The text is NFC-normalized already (by `_normalize`, in the graph); the
    # one rule here maps a no-break space to a space. (A rule is needed: a
    # model with no normalization rules logs a line each time it is loaded.)
    rules_dir = tempfile.mkdtemp()
    rules = os.path.join(rules_dir, "rules.tsv")
    with open(rules, "w", encoding="utf-8") as f:
        f.write("A0\t20\n")
    try:
        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences),
            model_writer=model,
            model_type=model_type,
            vocab_size=vocabulary_size,
            hard_vocab_limit=False,
            character_coverage=1.0,
            normalization_rule_tsv=rules,
            pad_id=PAD_ID, unk_id=UNK_ID, bos_id=START_ID, eos_id=END_ID,
            pad_piece=RESERVED_TOKENS[PAD_ID], unk_piece=RESERVED_TOKENS[UNK_ID],
            bos_piece=RESERVED_TOKENS[START_ID], eos_piece=RESERVED_TOKENS[END_ID],
            unk_surface=RESERVED_TOKENS[UNK_ID],
            num_threads=max(1, min(os.cpu_count() or 1, 16)),
            minloglevel=2,
        )
    except RuntimeError as e:
        error = vocabulary_error(e, vocabulary_size, model_type, len(sentences), name)
        if error is None:
            raise
        raise error from None
    finally:
        shutil.rmtree(rules_dir, ignore_errors=True)
    # The model records the rules' temporary path: cleared, the same texts
    # give the same model file in every process.
    proto = sentencepiece_model_pb2.ModelProto.FromString(model.getvalue())
    proto.normalizer_spec.ClearField("normalization_rule_tsv")
    return proto.SerializeToString()


def vocabulary_error(error, vocabulary_size, model_type, sentence_count, name=None):
    """The ValueError for SentencePiece's RuntimeError `error` when it
    refuses `vocabulary_size` for this text (too small for its characters,
    too high for what it can give, or any other check on the size), naming
    the size and the bound the trainer gave; None for any other error."""
    message = str(error)
    side = {"shared": "source and target "}.get(name, f"{name} " if name else "")
    text = f"the {sentence_count:,} {side}sentences learned from"
    small = _TOO_SMALL.search(message)
    if small:
        needed = int(small.group(2))
        return ValueError(
            f"{_FLAG} {vocabulary_size} is too small for this text: a SentencePiece "
            f"{model_type} vocabulary of {text} needs at least {needed} pieces, one per distinct "
            f"character ({needed - len(RESERVED_TOKENS)}, with '▁' for the space) and the "
            f"{len(RESERVED_TOKENS)} reserved tokens {list(RESERVED_TOKENS)}. Give "
            f"--vocabulary-size {needed} or more.")
    high = _TOO_HIGH.search(message)
    if high:
        return ValueError(
            f"{_FLAG} {vocabulary_size} is too large for this text: a SentencePiece "
            f"{model_type} vocabulary of {text} has at most {high.group(2)} pieces. Give "
            f"--vocabulary-size {high.group(2)} or less, or more text.")
    if "vocab" in message.casefold():  # another check on the size: its own words
        detail = message.strip().splitlines()[-1] if message.strip() else message
        return ValueError(f"{_FLAG} {vocabulary_size} was refused by the SentencePiece trainer "
                          f"for {text}: {detail}")
    return None
