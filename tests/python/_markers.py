"""Skip markers the torch test files share (import after pytest.importorskip("torch"))."""
import pytest
import torch

import flashattn
from flashattn import c_api


def _gpu_skip_reason():
    if not torch.cuda.is_available():
        return "needs a CUDA device"
    if not c_api.has_backward():
        try:
            return f"libflashattn has no usable backward pass: {c_api.backward_unavailable()}"
        except OSError as e:
            return f"libflashattn not found: {e}"
    return None


_SKIP = _gpu_skip_reason()
# A CUDA device and a library with the backward pass.
needs_gpu = pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
needs_custom_op = pytest.mark.skipif(
    not flashattn.HAS_CUSTOM_OP,
    reason=f"the flashattn custom ops need torch >= {flashattn.CUSTOM_OP_MIN_TORCH}; this is "
           f"torch {torch.__version__}")
