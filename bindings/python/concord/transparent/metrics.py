"""A Keras model's metric results over every rank, whatever Keras's backend:
what the epoch's logs (and val_ logs) and evaluate() report. The average of the
ranks' results is one process's result only for an unweighted mean over equal
shares: a metric weighted by sample_weight or class_weight divides by its own
rank's sum of weights, and a Precision or an AUC divides counts. Keras's own
metrics keep their state as sums over the samples seen (totals and counts,
confusion matrices), so their state is summed over ranks and their result
computed from that sum, as one process computes it; a metric whose state is
not known to be a sum (a script's own Metric subclass) keeps the average of
the ranks' results, and rank 0 names it once. Every rank must make the same
calls in the same order: one exchange through concord's engine per call."""
from __future__ import annotations

import contextlib
import sys

from concord.transparent.collective import average_logs, average_result, names, sum_floats

# keras.metrics classes every state variable of which is a sum over the
# samples seen, in Keras 3.15: Mean (total, count; also MeanMetricWrapper,
# hence every metric compile() makes of a function or name, and
# RootMeanSquaredError), Sum, the confusion counts of Precision, Recall, AUC,
# TruePositives... and the ...At... metrics, IoU's confusion matrix (MeanIoU,
# BinaryIoU, OneHot...), FBetaScore's (F1Score) and R2Score's sums. Their
# subclasses count only where Keras defines them: a script's may add any
# state. test_keras_equivalence.py checks each against the installed Keras.
SUMMED = ("Mean", "Sum", "Precision", "Recall", "AUC", "TruePositives", "TrueNegatives",
          "FalsePositives", "FalseNegatives", "SensitivityAtSpecificity",
          "SpecificityAtSensitivity", "PrecisionAtRecall", "RecallAtPrecision", "IoU",
          "FBetaScore", "R2Score")
_reported = set()


def _summed_classes():
    """The SUMMED classes this Keras has."""
    import keras
    return tuple(getattr(keras.metrics, n) for n in SUMMED if hasattr(keras.metrics, n))


def summed_state(metric, classes=None):
    """Whether the metric's state is Keras's own sums (SUMMED; classes: _summed_classes())."""
    classes = _summed_classes() if classes is None else classes
    return isinstance(metric, classes) and type(metric).__module__.split(".")[0] == "keras"


def _leaves(metric):
    """The metrics whose state metric.result() reads: compile()'s container
    (one result per metric it holds), else the metric itself."""
    try:
        from keras.src.trainers.compile_utils import CompileMetrics
    except ImportError:
        return [metric]
    return list(metric.metrics) if isinstance(metric, CompileMetrics) else [metric]


class _Local:
    """The result of a metric whose state is not known to be a sum: this rank's."""

    def __init__(self, value):
        self.value = value


@contextlib.contextmanager
def _marked(metrics):
    """The metrics' result() giving _Local(their result) meanwhile, so that the
    dict of compile()'s container says which of its keys they give."""
    for m in metrics:
        m.result = (lambda original: lambda: _Local(original()))(m.result)
    try:
        yield
    finally:
        for m in metrics:
            m.__dict__.pop("result", None)


def _results(model, averaged):
    """{key: result} as model.get_metrics_result() gives them (and in its
    order), the results of the `averaged` metrics as _Local."""
    out = {}
    with _marked(averaged):
        for metric in model.metrics:
            if not getattr(metric, "built", True):
                continue  # compile()'s, before any step: it has no results yet
            result = metric.result()
            if isinstance(result, _Local) and isinstance(result.value, dict):
                result = {k: _Local(v) for k, v in result.value.items()}
            if isinstance(result, dict):
                out.update(result)
            else:
                out[metric.name] = result
    return out


def _numpy(value):
    """A copy: on torch's CPU, convert_to_numpy shares the variable's memory,
    which the summed state then overwrites."""
    import numpy as np
    from keras import ops
    return np.array(ops.convert_to_numpy(value))


def _log_value(value):
    """As Keras logs a result: a float, or an array where it has several values."""
    a = _numpy(value)
    return float(a) if a.size == 1 else a


def _split(model):
    """The model's distinct leaf metrics: those whose state is summed, the others."""
    leaves = {}
    for metric in model.metrics:
        for leaf in _leaves(metric):
            leaves.setdefault(id(leaf), leaf)
    classes = _summed_classes()
    summed, others = [], []
    for m in leaves.values():
        (summed if summed_state(m, classes) else others).append(m)
    return summed, others


def global_results(model, name):
    """The model's metric results over every rank, from the metrics' current
    state (every rank must call it): {key: value} with the keys of
    get_metrics_result(), and the keys averaged rather than computed from the
    summed state. A non-scalar result of such a metric stays this rank's (as
    before). The metrics' variables are left as they were."""
    import numpy as np

    import concord
    summed, others = _split(model)
    variables = [v for m in summed for v in m.variables]
    local = _results(model, others)
    averaged = [k for k, v in local.items()
                if isinstance(v, _Local) and _numpy(v.value).size == 1]
    saved = [_numpy(v) for v in variables]
    flat = [s.ravel().astype(np.float64) for s in saved]
    flat.append(np.array([float(_numpy(local[k].value)) for k in averaged], np.float64))
    total = sum_floats(np.concatenate(flat), name)
    exact = _from_state(model, others, variables, saved, total)
    means = dict(zip(averaged, total[len(total) - len(averaged):] / concord.size()))
    out = {}
    for k, v in local.items():
        if k in means:
            out[k] = float(means[k])
        else:  # a non-scalar _Local stays this rank's
            out[k] = _log_value(v.value if isinstance(v, _Local) else exact[k])
    return out, averaged


def _from_state(model, others, variables, saved, total):
    """The results with `total`'s leading values (the ranks' summed states) in
    `variables`, which then get back their `saved` values: Keras may read them
    after the epoch (fit()'s state when it returns, get_metrics_result())."""
    try:
        offset = 0
        for v, s in zip(variables, saved):
            v.assign(total[offset:offset + s.size].reshape(s.shape).astype(s.dtype))
            offset += s.size
        return _results(model, others)
    finally:
        for v, s in zip(variables, saved):
            v.assign(s)


def _report(averaged):
    """Rank 0 names, once each, the metrics averaged rather than reduced exactly."""
    import concord
    new = [k for k in averaged if k not in _reported]
    _reported.update(new)
    if new and concord.rank() == 0:
        print(f"concord: {', '.join(new)}: the mean of the ranks' results, which may not be "
              "one process's result (not one of Keras's own metrics, whose state concord sums "
              "over ranks before computing the result)", file=sys.stderr, flush=True)


def evaluate_logs(model, logs):
    """evaluate()'s dict of results over every rank (the metrics hold its state)."""
    results, averaged = global_results(model, f"concord.run/evaluate/{next(names)}")
    if set(results) != set(logs):
        # A test_step of the script's own returned other keys than the metrics':
        # Keras returned its last step's logs, which can only be averaged.
        return average_result(logs)
    _report(averaged)
    return {k: results[k] for k in logs}


def local_results(model):
    """This rank's results, as global_results gives them: where every rank took
    the whole of the data (inputs concordrun does not shard), they are every
    rank's, and its state summed over ranks would count each sample N times."""
    return {k: _log_value(v) for k, v in _results(model, []).items()}, []


class GlobalMetrics:
    """A Keras callback's part (mixed in before keras.callbacks.Callback; first
    in fit()'s callbacks, so that the others see the global values): the
    epoch's logs, and val_ logs, over every rank, in place. Keras computes the
    epoch's logs before validation, which resets the metrics: their training
    state is read when validation begins (on_test_begin, before the reset),
    the validation's at the end of the epoch. reduces(model) says whether to;
    whole says, for the training and the validation data, whether every rank
    took the whole of it (set by the fit() patch; a script shards its own)."""

    whole = (False, False)

    def reduces(self, model):
        import concord
        return concord.size() > 1

    def on_epoch_begin(self, epoch, logs=None):
        self._training = None

    def on_test_begin(self, logs=None):
        if self.reduces(self.model):
            self._training = self._results(self.whole[0], "train")

    def on_epoch_end(self, epoch, logs=None):
        if not logs or not self.reduces(self.model):
            return
        training, validation = getattr(self, "_training", None), ({}, [])
        self._training = None
        if training is None:
            training = self._results(self.whole[0], "train")
        else:
            validation = self._results(self.whole[1], "validation")
        merged = dict(training[0], **{f"val_{k}": v for k, v in validation[0].items()})
        if set(merged) != set(logs):
            # A train_step or test_step of the script's own returned other keys
            # than the metrics': Keras logged its last step's, to be averaged.
            average_logs(logs, epoch)
            return
        _report(training[1] + [f"val_{k}" for k in validation[1]])
        logs.update(merged)

    def _results(self, whole, what):
        if whole:
            return local_results(self.model)
        return global_results(self.model, f"concord.run/metrics/{what}/{next(names)}")
