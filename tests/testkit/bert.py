"""The tiny BERT: its hparams and generated SQuAD data."""

import pytest

from deploybench.models import bert

TINY = {
    "vocab_size": 512, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
    "intermediate_size": 64, "max_position_embeddings": 64, "type_vocab_size": 2,
    "initializer_range": 0.02, "gelu_approximate": "tanh", "max_seq_length": 64,
    "doc_stride": 16, "max_query_length": 16, "n_best_size": 20, "max_answer_length": 30,
    "do_lower_case": True, "vocab_file": None,
}
SIZE = {"n_articles": 2, "paragraphs": 3, "questions": 3, "fillers": 6}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("squad")
    bert.generate_dataset(TINY, str(out), seed=0, **SIZE)
    return out
