"""What a configuration's values must respect, refused while the config is read or a run is
planned, naming the value: a plug-in's hyper-parameters (its schema), a batch's memory on
its device."""

import re

import pytest

from deploybench.settings.config import ConfigError
from deploybench.settings.resolve import Settings
from testkit.workflow import ROOT, main_config


def test_a_plug_ins_hyper_parameters_are_checked_as_the_config_is_read():
    """A negative hparams.hidden_size used to pass planning and fail in the weights job:
    the plug-in's schema (config/schema/hparams-<plugin>.schema.yaml) refuses it, naming
    the value and its place, as do a probability above 1 and a symbol set no plug-in has."""
    for model, hparams, where, what in [
            ("tft-tiny", {"hidden_size": -4}, "hidden_size", "-4 is less than the minimum of 1"),
            ("tft-tiny", {"dropout": 1.5}, "dropout", "1.5 is greater than the maximum of 1"),
            ("fastpitch-tiny", {"symbol_set": "klingon"}, "symbol_set",
             "'klingon' is not one of ['english_basic', 'english_basic_lowercase']")]:
        bad = Settings(main_config(model_overrides={model: {"hparams": hparams}}))
        with pytest.raises(ConfigError, match=re.escape(
                f"model config {ROOT}/tests/config/models/{model}.yaml with model_overrides."
                f"{model}: hparams: invalid value at '{where}': {what}")):
            assert bad.models  # read (and checked) at first use


def test_a_batch_that_cannot_fit_its_device_is_refused_while_planning_with_its_sizes():
    """Batch 262,144 of a TFT used to be planned and run for minutes before failing without
    naming its size. Planning refuses it now, where its inputs and outputs and the model's
    working memory (a lower bound from its hparams) exceed the key's device: here a T4's
    16 GiB, with hidden size 64; at hidden size 16 it fits."""
    batch = {"offline": {"batch_sizes": [262144]}, "triton": {"max_batch_size": 262144}}
    wide = Settings(main_config(model_overrides={"tft-tiny": {**batch,
                                                              "hparams": {"hidden_size": 64}}}))
    with pytest.raises(ConfigError, match=re.escape(
            "model 'tft-tiny' on GPU key 't4': offline.batch_sizes 262,144 needs 23.5 GiB at "
            "the least (262,144 samples x (888 bytes of inputs and outputs x 3 copies + 93,696 "
            "bytes of the model's working memory, estimated from its hparams)), but GPU key "
            "'t4' has 16 GiB")):
        wide.run("tft-tiny", "t4", "onnx", "fp32")
    Settings(main_config(model_overrides={"tft-tiny": batch})).run("tft-tiny", "t4", "onnx",
                                                                     "fp32")
