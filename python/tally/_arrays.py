"""Arrays tally takes: numpy on the host, CuPy and PyTorch arrays on a CUDA device; new arrays of
the same kind, on the same device, and the stream their framework runs on now."""

from __future__ import annotations

import numpy as np

# dtypes the library counts, by numpy name (bfloat16, which numpy has not got, by PyTorch's and JAX's)
SAMPLE_DTYPES = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "float16", "bfloat16", "float32",
                 "float64")
_TAKEN = frozenset(SAMPLE_DTYPES)


_MODULES: dict = {}  # an array's type -> the top module that defines it ("numpy", "torch", ...)
_MODULES_KEPT = 64  # types made on the fly are not all kept


def _module_of(a) -> str:
    kind = type(a)
    module = _MODULES.get(kind)
    if module is None:
        module = kind.__module__.split(".")[0]
        if len(_MODULES) < _MODULES_KEPT:
            _MODULES[kind] = module
    return module


# DLPack's (type code, bits) of each sample and count dtype, for arrays handed to the extension by
# address: 0 signed, 1 unsigned integers, 2 floats, 4 bfloat16.
_DLPACK_TYPES = {"int8": (0, 8), "uint8": (1, 8), "int16": (0, 16), "uint16": (1, 16), "int32": (0, 32),
                 "uint32": (1, 32), "int64": (0, 64), "uint64": (1, 64), "float16": (2, 16), "bfloat16": (4, 16),
                 "float32": (2, 32), "float64": (2, 64)}


class Kind:
    """Where an array lives and how to make more like it."""

    def __init__(self, name: str, device=None, jax: bool = False):
        self.name = name  # "numpy", "cupy" or "torch": the arrays tally reads and makes
        # The framework's device object and its number (CuPy's id, PyTorch's index).
        self.framework_device = device
        self.index = None if device is None else device.id if name == "cupy" else device.index
        self.jax = jax  # the caller's arrays are JAX's: results go back as JAX arrays
        # A hashable name of the device the arrays live on (the caches' keys).
        self.device = "cpu" if name == "numpy" else (name, self.index)

    def for_jax(self) -> "Kind":
        """This kind, for a caller whose arrays are JAX's."""
        return Kind(self.name, self.framework_device, jax=True)

    def export(self, result):
        """`result` (an array tally made, or a scalar) as the caller's kind of array: itself, or for
        JAX a JAX array over the same memory, once the stream has finished writing it (JAX does not
        know tally's stream)."""
        if not self.jax:
            return result
        import jax

        if not self.on_gpu:
            return jax.numpy.asarray(result)
        self.synchronize()
        return jax.dlpack.from_dlpack(result)

    @property
    def on_gpu(self) -> bool:
        return self.name != "numpy"

    def stream(self, stream=None) -> int:
        """The CUDA stream to run on, as an integer handle: `stream` if given (an integer, or a
        CuPy or PyTorch stream), else the framework's current stream for the array's device."""
        if not self.on_gpu:
            return 0
        if stream is not None:
            for attribute in ("ptr", "cuda_stream"):
                if hasattr(stream, attribute):
                    return int(getattr(stream, attribute))
            return int(stream)
        if self.name == "cupy":
            import cupy

            if cupy.cuda.runtime.getDevice() == self.index:
                return int(cupy.cuda.get_current_stream().ptr)
            with cupy.cuda.Device(self.index):
                return int(cupy.cuda.get_current_stream().ptr)
        return int(_torch_current_stream()(self.index))

    def address(self, a) -> int:
        """The device address of array `a` of this kind."""
        return a.data.ptr if self.name == "cupy" else a.data_ptr()

    def view(self, a, name: str):
        """`a` as the extension takes it: a numpy array itself; a device array of the dtype named
        `name` as (address, size, DLPack type code, bits, device), which the caller keeps alive for
        the call. The extension could take the device array itself, through DLPack, but PyTorch's
        __dlpack__ costs microseconds a call (docs/python.md, "Small calls")."""
        if self.name == "numpy":
            return a
        code, bits = _DLPACK_TYPES[name]
        return (self.address(a), a.size if self.name == "cupy" else a.numel(), code, bits, self.index)

    def synchronize(self):
        """Waits for the framework's current stream on this kind's device."""
        if self.name == "torch":
            import torch

            torch.cuda.current_stream(self.index).synchronize()
        elif self.name == "cupy":
            import cupy

            with cupy.cuda.Device(self.index):
                cupy.cuda.get_current_stream().synchronize()

    def empty(self, n: int, dtype):
        if self.name == "numpy":
            return np.empty(n, dtype)
        if self.name == "cupy":
            import cupy

            with cupy.cuda.Device(self.index):
                return cupy.empty(n, _dtype_or_name(dtype))
        import torch

        return torch.empty(n, dtype=_torch_dtype(dtype), device=self.framework_device)

    def astype(self, a, dtype):
        """`a` converted to `dtype` on its device ("bfloat16": PyTorch arrays only)."""
        if self.name == "torch":
            return a.to(_torch_dtype(dtype))
        return a.astype(np.dtype(dtype))

    def from_numpy(self, host: np.ndarray):
        """`host` copied to this kind's device (itself for numpy)."""
        if self.name == "numpy":
            return host
        if self.name == "cupy":
            import cupy

            with cupy.cuda.Device(self.index):
                return cupy.asarray(host)
        import torch

        return torch.from_numpy(np.ascontiguousarray(host)).to(self.framework_device)

    def to_numpy(self, a) -> np.ndarray:
        """`a` on the host (waits for the device)."""
        if self.name == "numpy":
            return a
        if self.name == "cupy":
            return a.get()
        return a.cpu().numpy()

    def scalar(self, a):
        """A one-element array of this kind as a numpy scalar (waits for the device)."""
        return self.to_numpy(a).reshape(-1)[0]


_TORCH_STREAM_QUERY = []  # the function below, once found


def _torch_current_stream():
    """A function of a device index giving PyTorch's current stream there as an integer handle:
    the raw query PyTorch's own compiler uses (0.2 microseconds; the public
    torch.cuda.current_stream builds a Stream object, 3.6), or the public one where a build has
    not got it."""
    if not _TORCH_STREAM_QUERY:
        import torch

        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        _TORCH_STREAM_QUERY.append(raw if raw is not None
                                   else lambda index: torch.cuda.current_stream(index).cuda_stream)
    return _TORCH_STREAM_QUERY[0]


def _dtype_or_name(dtype):
    """`dtype` as a numpy dtype, or the name "bfloat16" (numpy has no such dtype)."""
    return dtype if isinstance(dtype, str) and dtype == "bfloat16" else np.dtype(dtype)


_TORCH_DTYPES_OF = {}  # numpy dtype (or "bfloat16") -> torch dtype, filled on use


def _torch_dtype(dtype):
    found = _TORCH_DTYPES_OF.get(dtype)
    if found is None:
        import torch

        name = _dtype_or_name(dtype)
        found = _TORCH_DTYPES_OF.setdefault(dtype, getattr(torch, name if isinstance(name, str) else name.name))
    return found


_TORCH_DTYPES = {}  # torch dtype -> numpy dtype, filled on first use
_NAMES = {}  # numpy dtype -> its name (numpy's dtype.name costs microseconds a call)


def numpy_dtype(a) -> np.dtype:
    """The numpy dtype of `a` (numpy, CuPy or PyTorch); a torch dtype numpy has not got (bfloat16)
    stays one."""
    if _module_of(a) == "torch":
        if not _TORCH_DTYPES:
            import torch

            for name in ("uint8", "int8", "int16", "int32", "uint16", "uint32", "int64", "uint64", "float16",
                         "float32", "float64", "bool"):
                _TORCH_DTYPES[getattr(torch, name)] = np.dtype(name)
        return _TORCH_DTYPES.get(a.dtype, a.dtype)
    return a.dtype if isinstance(a.dtype, np.dtype) else np.dtype(a.dtype)


def dtype_name(dtype) -> str:
    """`dtype`'s numpy name ("float32"); "bfloat16" for PyTorch's; "" for other dtypes numpy has not got."""
    name = _NAMES.get(dtype)
    if name is None:
        if isinstance(dtype, np.dtype):
            name = dtype.name
        else:
            name = "bfloat16" if str(dtype) == "torch.bfloat16" else ""
        name = _NAMES.setdefault(dtype, name)
    return name


_NO_HOST_BFLOAT16 = "bfloat16 samples are taken on a GPU only (numpy has no bfloat16)"


def _from_jax(a, argument: str):
    """A JAX array as numpy (on the CPU) or, on a GPU, as a PyTorch or CuPy array over the same
    memory (tally allocates its results through one of them), once JAX has finished computing it."""
    a.block_until_ready()
    devices = a.devices() if hasattr(a, "devices") else {a.device()}
    if all(d.platform == "cpu" for d in devices):
        if str(a.dtype) == "bfloat16":
            raise TypeError(f"{argument}: {_NO_HOST_BFLOAT16}")
        return np.asarray(a)
    bridges = ("torch", "cupy")
    if str(a.dtype) == "bfloat16":  # CuPy has no bfloat16
        bridges = ("torch",)
    for bridge in bridges:
        try:
            module = __import__(bridge)
        except ImportError:
            continue
        return module.from_dlpack(a)
    if len(bridges) == 1:
        raise TypeError(f"{argument}: JAX bfloat16 arrays on a GPU go through PyTorch, which is not installed")
    raise TypeError(f"{argument}: JAX arrays on a GPU go through PyTorch or CuPy, and neither is installed")


_TORCH_KINDS: dict = {}  # a CUDA device's index -> the Kind of PyTorch arrays there
_NUMPY_KIND = Kind("numpy")


def take(a, argument: str):
    """`a` as a flat, contiguous array tally can read, with its Kind. Host data that is not a numpy
    array (lists, tuples) becomes one, as numpy would make it; device arrays stay on their device
    (a non-contiguous one is made contiguous there). Raises TypeError naming `argument` for other
    objects and unsupported dtypes."""
    module = _module_of(a)
    if module == "cupy":
        kind = Kind("cupy", a.device)
        flat = a.ravel()
        if not flat.flags.c_contiguous:
            import cupy

            flat = cupy.ascontiguousarray(flat)
    elif module == "torch":
        if not a.is_cuda:
            if dtype_name(a.dtype) == "bfloat16":
                raise TypeError(f"{argument}: {_NO_HOST_BFLOAT16}")
            a = a.numpy()  # a CPU tensor: the same memory, through numpy
            return take(a, argument)
        kind = _TORCH_KINDS.get(a.get_device())  # get_device: an int, where a.device makes an object a read
        if kind is None:
            kind = _TORCH_KINDS.setdefault(a.get_device(), Kind("torch", a.device))
        flat = a if a.dim() == 1 else a.reshape(-1)
        if not flat.is_contiguous():
            flat = flat.contiguous()
    elif module in ("jax", "jaxlib"):
        flat, kind = take(_from_jax(a, argument), argument)
        return flat, kind.for_jax()
    elif module == "numpy" or isinstance(a, (list, tuple, int, float)):
        kind = _NUMPY_KIND
        flat = np.ascontiguousarray(np.asarray(a).ravel())
        # What numpy counts as it does: bools as uint8 0 and 1 (numpy.histogram converts them),
        # and the other byte order (a big-endian array, as np.load may give) swapped to this host's.
        if flat.dtype == np.bool_:
            flat = flat.astype(np.uint8)
        elif not flat.dtype.isnative:
            flat = flat.astype(flat.dtype.newbyteorder("="))
    elif hasattr(a, "__dlpack__"):
        raise TypeError(f"{argument}: arrays from {module} are not supported yet (numpy, CuPy and PyTorch are)")
    else:
        raise TypeError(f"{argument}: expected an array, got {type(a).__name__}")
    dtype = numpy_dtype(flat)
    name = dtype_name(dtype)
    if name not in _TAKEN:
        raise TypeError(f"{argument}: dtype {dtype} is not supported (tally takes {', '.join(SAMPLE_DTYPES)})")
    if name == "bfloat16" and not kind.on_gpu:  # a numpy array of ml_dtypes' bfloat16
        raise TypeError(f"{argument}: {_NO_HOST_BFLOAT16}")
    return flat, kind
