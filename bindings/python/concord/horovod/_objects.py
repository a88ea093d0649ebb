"""Horovod's broadcast_object and allgather_object (any picklable object, any
framework), on concord's engine."""
from __future__ import annotations

import itertools
import pickle

import numpy as np

import concord as _concord_py
from concord.horovod import _basics

_counter = itertools.count()


def _object_name(kind, name):
    return f"concord.horovod/{kind}/{name if name else next(_counter)}"


def broadcast_object(obj, root_rank=0, session=None, name=None, process_set=None):
    """root_rank's picklable object on every rank."""
    _basics.check_process_set(process_set)
    _basics.check_root(root_rank)
    if session is not None:
        raise ValueError("concord.horovod: broadcast_object(session=...) is TensorFlow 1; "
                         "TensorFlow 2 and torch run eagerly, leave session out")
    base = _object_name("broadcast_object", name)
    mine = _concord_py.rank() == root_rank
    data = np.frombuffer(pickle.dumps(obj), np.uint8) if mine else np.zeros(0, np.uint8)
    length = _concord_py.broadcast(np.array([data.size], np.int64), root_rank, name=base + "/n")
    buf = data.copy() if mine else np.zeros(int(length[0]), np.uint8)
    if buf.size:
        buf = _concord_py.broadcast(buf, root_rank, name=base + "/data")
    return obj if mine else pickle.loads(buf.tobytes())


def allgather_object(obj, session=None, name=None, process_set=None):
    """A list of every rank's picklable object, in rank order."""
    _basics.check_process_set(process_set)
    _basics.require_init()
    base = _object_name("allgather_object", name)
    data = np.frombuffer(pickle.dumps(obj), np.uint8)
    sizes = _concord_py.allgather(np.array([data.size], np.int64), name=base + "/n")
    gathered = _concord_py.allgather(data, name=base + "/data")
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    return [pickle.loads(gathered[offsets[i]:offsets[i + 1]].tobytes())
            for i in range(len(sizes))]
