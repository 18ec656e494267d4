"""One of the two workers of `test_two_workers_read_disjoint_shards` (its
TF_CONFIG in the environment): reads one epoch of streamed corpora through
MultiWorkerMirroredStrategy's input pipelines and writes the pairs it saw.

    python tests/data/two_worker_shards.py OUT.json NAME=SRC,TGT [NAME=SRC,TGT ...]
"""

import json
import sys


def main(argv):
    import tensorflow as tf

    from keras_attention.data import TextFilesCorpus, load_shard

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    seen = {}
    for spec in argv[1:]:
        name, files = spec.split("=")
        corpus = TextFilesCorpus({"train": tuple(files.split(","))}, in_memory_pairs=0)
        contexts = []

        def dataset_fn(context, corpus=corpus, contexts=contexts):
            contexts.append([context.num_input_pipelines, context.input_pipeline_id])
            pairs, sharded = load_shard(corpus, "train", context)
            assert sharded
            return pairs.batch(8)

        pairs = []
        for sources, targets in strategy.distribute_datasets_from_function(dataset_fn):
            for s, t in zip(strategy.experimental_local_results(sources),
                            strategy.experimental_local_results(targets)):
                pairs += [[a.decode(), b.decode()] for a, b in zip(s.numpy(), t.numpy())]
        seen[name] = {"contexts": contexts, "pairs": pairs}
    with open(argv[0], "w", encoding="utf-8") as f:
        json.dump(seen, f)


if __name__ == "__main__":
    main(sys.argv[1:])
