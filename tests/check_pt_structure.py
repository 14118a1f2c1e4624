#!/usr/bin/env python3
"""Checks with the Python standard library alone (no torch) that a state-dict .pt written by `lab` has the
structure torch.load(path, weights_only=True) accepts, and that its tensors equal a safetensors twin's.

Usage: check_pt_structure.py FILE.pt TWIN.safetensors

The zip (zipfile): one archive folder, data.pkl, byteorder "little", version "3\\n", stored members whose
data start on 64-byte boundaries. The pickle: protocol 2, only opcodes torch's weights-only unpickler handles,
read by a pickle.Unpickler whose find_class allows only what weights_only allows for such a file
(collections.OrderedDict, torch._utils._rebuild_tensor_v2, torch.<Half|Float|BFloat16|Double|Long>Storage)
and whose persistent_load takes torch's ('storage', type, key, 'cpu', numel) ids, as torch's own does.
The dict: "model" an OrderedDict of contiguous tensors (the twin's, plus an int64 0 num_batches_tracked
beside each running_var), "names" {int: str}, "nc" == len(names), "epoch" int, "yaml" dict,
"train_metrics" {str: float}. Prints "ok: N tensors (+M num_batches_tracked)" and exits 0, or prints one
line and exits 1.
"""
import collections
import io
import json
import pickle
import pickletools
import struct
import sys
import zipfile

# The opcodes torch/_weights_only_unpickler.py interprets (any other one is refused there).
WEIGHTS_ONLY_OPCODES = {
    "PROTO", "STOP", "GLOBAL", "NEWOBJ", "REDUCE", "BUILD", "APPEND", "APPENDS", "SETITEM", "SETITEMS",
    "MARK", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "EMPTY_TUPLE", "EMPTY_LIST", "EMPTY_DICT", "EMPTY_SET",
    "BINPUT", "LONG_BINPUT", "BINGET", "LONG_BINGET", "MEMOIZE", "NONE", "NEWTRUE", "NEWFALSE", "BININT",
    "BININT1", "BININT2", "LONG1", "BINFLOAT", "BINUNICODE", "SHORT_BINUNICODE", "BINPERSID", "FRAME",
}
ALIGNMENT = 64


class Bad(Exception):
    pass


class StorageType:
    def __init__(self, name, dtype, itemsize):
        self.name, self.dtype, self.itemsize = name, dtype, itemsize


STORAGE_TYPES = {
    "FloatStorage": StorageType("FloatStorage", "F32", 4),
    "HalfStorage": StorageType("HalfStorage", "F16", 2),
    "BFloat16Storage": StorageType("BFloat16Storage", "BF16", 2),
    "DoubleStorage": StorageType("DoubleStorage", "F64", 8),
    "LongStorage": StorageType("LongStorage", "I64", 8),
}
COUNTER = "num_batches_tracked"  # BatchNorm's int64 counter: written as 0 beside each running_var, no twin


class Storage:
    def __init__(self, kind, data, numel):
        self.kind, self.data, self.numel = kind, data, numel


class Tensor:
    def __init__(self, storage, offset, size, stride, requires_grad, hooks):
        self.storage, self.offset, self.size, self.stride = storage, offset, size, stride
        self.requires_grad, self.hooks = requires_grad, hooks


def rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks, metadata=None):
    if not isinstance(storage, Storage):
        raise Bad(f"_rebuild_tensor_v2 got a {type(storage).__name__} where a storage belongs")
    for name, value in (("size", size), ("stride", stride)):
        if type(value) is not tuple or any(type(v) is not int for v in value):
            raise Bad(f"_rebuild_tensor_v2 {name} is not a tuple of int: {value!r}")
    if type(storage_offset) is not int or type(requires_grad) is not bool:
        raise Bad("_rebuild_tensor_v2 storage_offset / requires_grad have the wrong types")
    if type(backward_hooks) is not collections.OrderedDict:
        raise Bad("_rebuild_tensor_v2 backward_hooks is not an OrderedDict")
    return Tensor(storage, storage_offset, size, stride, requires_grad, backward_hooks)


class WeightsOnlyStandIn(pickle.Unpickler):
    def __init__(self, data, archive, folder):
        super().__init__(io.BytesIO(data))
        self.archive, self.folder = archive, folder

    def find_class(self, module, name):
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return rebuild_tensor_v2
        if module == "torch" and name in STORAGE_TYPES:
            return STORAGE_TYPES[name]
        raise Bad(f"global {module}.{name} is not one weights_only allows in a state dict")

    def persistent_load(self, pid):
        if type(pid) is not tuple or len(pid) != 5 or pid[0] != "storage":
            raise Bad(f"persistent id {pid!r} is not ('storage', type, key, location, numel)")
        _, kind, key, location, numel = pid
        if not isinstance(kind, StorageType) or type(key) is not str or location != "cpu" or \
                type(numel) is not int:
            raise Bad(f"persistent id {pid!r} has the wrong types")
        member = self.folder + "data/" + key
        data = self.archive.read(member)
        if len(data) != numel * kind.itemsize:
            raise Bad(f"{member} has {len(data)} bytes for {numel} {kind.dtype} elements")
        return Storage(kind, data, numel)


def data_offset(path, info):
    with open(path, "rb") as f:
        f.seek(info.header_offset)
        header = f.read(30)
    name_length, extra_length = struct.unpack("<HH", header[26:30])
    return info.header_offset + 30 + name_length + extra_length


def check_archive(path, archive):
    infos = archive.infolist()
    folders = {info.filename.split("/", 1)[0] for info in infos}
    if len(folders) != 1:
        raise Bad(f"members lie in {len(folders)} folders, not one archive folder")
    folder = folders.pop() + "/"
    if infos[0].filename != folder + "data.pkl":
        raise Bad(f"the first member is {infos[0].filename}, not {folder}data.pkl")
    if archive.read(folder + "byteorder") != b"little":
        raise Bad("byteorder is not 'little'")
    if archive.read(folder + "version") != b"3\n":
        raise Bad(f"version is {archive.read(folder + 'version')!r}, not b'3\\n'")
    for info in infos:
        if info.compress_type != zipfile.ZIP_STORED:
            raise Bad(f"{info.filename} is compressed; torch stores members")
        if data_offset(path, info) % ALIGNMENT:
            raise Bad(f"{info.filename} data starts at {data_offset(path, info)}, "
                      f"not on a {ALIGNMENT}-byte boundary")
    return folder


def check_opcodes(data):
    ops = list(pickletools.genops(data))
    if ops[0][0].name != "PROTO" or ops[0][1] != 2:
        raise Bad(f"the pickle starts with {ops[0][0].name} {ops[0][1]}, not PROTO 2")
    for op, _, position in ops:
        if op.name not in WEIGHTS_ONLY_OPCODES:
            raise Bad(f"opcode {op.name} at offset {position} is not one the weights-only unpickler handles")


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    length = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + length])
    header.pop("__metadata__", None)
    body = raw[8 + length:]
    return {key: (v["dtype"], v["shape"], body[v["data_offsets"][0]:v["data_offsets"][1]])
            for key, v in header.items()}


def check_checkpoint(root, twin):
    if type(root) is not dict:
        raise Bad(f"the pickled object is a {type(root).__name__}, not a dict")
    model, names = root.get("model"), root.get("names")
    if type(model) is not collections.OrderedDict:
        raise Bad("'model' is not an OrderedDict")
    if type(names) is not dict or any(type(k) is not int or type(v) is not str for k, v in names.items()):
        raise Bad("'names' is not a dict of int -> str")
    if sorted(names) != list(range(len(names))) or root.get("nc") != len(names):
        raise Bad(f"'names' has ids {sorted(names)[:5]}... and 'nc' is {root.get('nc')!r}")
    if type(root.get("epoch")) is not int or type(root.get("yaml")) is not dict:
        raise Bad("'epoch' is not an int or 'yaml' is not a dict")
    metrics = root.get("train_metrics")
    if type(metrics) is not dict or any(type(k) is not str or type(v) is not float for k, v in metrics.items()):
        raise Bad("'train_metrics' is not a dict of str -> float")
    counters = {key for key in model if key.endswith("." + COUNTER)}
    if set(model) - counters != set(twin):
        differing = sorted((set(model) - counters) ^ set(twin))
        raise Bad(f"the state dict's keys differ from the twin's: {differing[:5]}")
    for key, tensor in model.items():
        if type(tensor) is not Tensor or tensor.requires_grad or tensor.hooks:
            raise Bad(f"'{key}' is not a plain tensor")
        if key in counters:
            if tensor.storage.kind.dtype != "I64" or tensor.size != () or tensor.storage.data != bytes(8) or \
                    key[:-len(COUNTER)] + "running_var" not in model:
                raise Bad(f"'{key}' is not an int64 scalar 0 beside a running_var")
            continue
        dtype, shape, data = twin[key]
        expected_stride, step = [], 1
        for d in reversed(tensor.size):
            expected_stride.insert(0, step)
            step *= d
        if list(tensor.size) != shape or list(tensor.stride) != expected_stride or tensor.offset != 0:
            raise Bad(f"'{key}' has size {tensor.size} stride {tensor.stride}; the twin's shape is {shape}")
        if tensor.storage.kind.dtype != dtype or tensor.storage.numel != step or tensor.storage.data != data:
            raise Bad(f"'{key}' ({tensor.storage.kind.dtype}) differs from the twin ({dtype})")
    return len(model) - len(counters), len(counters)


def main():
    if len(sys.argv) != 3:
        print("usage: check_pt_structure.py FILE.pt TWIN.safetensors")
        return 2
    path = sys.argv[1]
    try:
        with zipfile.ZipFile(path) as archive:
            folder = check_archive(path, archive)
            data = archive.read(folder + "data.pkl")
            check_opcodes(data)
            root = WeightsOnlyStandIn(data, archive, folder).load()
            count, counters = check_checkpoint(root, read_safetensors(sys.argv[2]))
    except (Bad, zipfile.BadZipFile, KeyError, pickle.UnpicklingError) as error:
        print(f"{path}: {error}")
        return 1
    print(f"ok: {count} tensors (+{counters} {COUNTER})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
