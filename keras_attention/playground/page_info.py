"""What the playground page says about its model besides the model itself:
the sentences it offers to try (by the model's source language) and the
scores its metadata records."""

EXAMPLE = "The red book is on the table."
# Sentences the page offers to try, by the model's source language (the
# first is the one it starts with): the articles' ("dejé" attends to "I
# left", "rojo" to "red") and what the bundled corpus's grammar can say.
EXAMPLES = {
    "en": [EXAMPLE, "I left the red book at the library.", "Where is the train station?",
           "We will eat three green apples tomorrow."],
    "es": ["El libro rojo está sobre la mesa.", "Dejé el libro rojo en la biblioteca.",
           "¿Dónde está la estación de tren?", "Mañana comeremos tres manzanas verdes."],
}


def source_language(translator):
    """The model's source language code, as its metadata records it (a
    shipped preset's `zoo.languages`, a converted OPUS-MT model's
    `converted_from.languages`, a run's `config.source_lang`), or "en" (the
    bundled corpus's)."""
    metadata = translator.metadata
    languages = ((metadata.get("zoo") or {}).get("languages")
                 or (metadata.get("converted_from") or {}).get("languages"))
    if languages:
        return languages[0]
    return (metadata.get("config") or {}).get("source_lang") or "en"


def model_scores(translator):
    """What the page says of the model's quality, from its metadata: a
    shipped preset's test and public-test scores (`zoo.test`,
    `zoo.public_test`, with the published model's figure), or a run's score
    on its evaluation split; {} when it has none."""
    metadata = translator.metadata
    zoo = metadata.get("zoo") or {}
    scores = {}
    if zoo.get("test"):
        scores["test"] = {key: zoo["test"].get(key) for key in ("bleu", "chrf", "test_set")}
    elif isinstance(metadata.get("bleu"), (int, float)):
        scores["test"] = {"bleu": metadata["bleu"], "chrf": metadata.get("chrf"),
                          "test_set": f"the run's {metadata.get('eval_split') or 'test'} split"}
    public = zoo.get("public_test")
    if public:
        scores["public_test"] = {key: public.get(key) for key in ("bleu", "chrf", "test_set")}
        published = public.get("published") or {}
        if published.get("model"):
            scores["public_test"]["published"] = {key: published.get(key)
                                                  for key in ("model", "bleu", "chrf")}
    return scores
