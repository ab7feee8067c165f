"""The argument lists gpuscope reads a call's flags by (``analyzers.efficiency.schemas``) are PyTorch's own: each
current one against ``torch._C._jit_get_schemas_for_operator``; the flags that change a count are read by name
whatever the position. (Every call of a modelled op in the bundled traces fits one of its op's lists:
``tests/accuracy/test_flops.py``.)"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from gpuscope.analyzers.efficiency.flops import ELEMENTWISE, OUT_ARITY, op_cost  # noqa: E402
from gpuscope.analyzers.efficiency.inputs import Inputs  # noqa: E402
from gpuscope.analyzers.efficiency.schemas import SCHEMAS, Kind, bind  # noqa: E402


def _kind(t: object) -> Kind:
    if isinstance(t, torch.TensorType):
        return "tensor"
    if isinstance(t, torch.OptionalType):
        inner = t.getElementType()
        if isinstance(inner, torch.TensorType):
            return "tensor?"
        return "list" if isinstance(inner, torch.ListType) else "scalar?"
    if isinstance(t, torch.ListType):
        return "tensors" if isinstance(t.getElementType(), torch.TensorType) else "list"
    if isinstance(t, torch.StringType):
        return "str"
    return "scalar"


@pytest.mark.parametrize("op", sorted(SCHEMAS))
def test_each_current_schema_is_torchs_own(op: str) -> None:
    theirs = {s.overload_name: s for s in torch._C._jit_get_schemas_for_operator(op)}
    for mine in SCHEMAS[op]:
        if not mine.current:
            assert mine.overload not in theirs or [a.name for a in theirs[mine.overload].arguments] != list(mine.names)
            continue
        assert mine.overload in theirs, f"{op}.{mine.overload} is not in torch {torch.__version__}"
        args = theirs[mine.overload].arguments
        assert tuple(a.name for a in args) == mine.names
        assert tuple(_kind(a.type) for a in args) == mine.kinds


def test_out_variants_are_told_by_their_length_where_no_functional_overload_ends_in_a_tensor() -> None:
    for name, lengths in OUT_ARITY.items():
        assert name in ELEMENTWISE
        schemas = torch._C._jit_get_schemas_for_operator(f"aten::{name}")
        outs = {len(s.arguments) for s in schemas if s.arguments and s.arguments[-1].is_out}
        functional_tensor_last = {len(s.arguments) for s in schemas
                                  if s.arguments and not any(a.is_out for a in s.arguments)
                                  and isinstance(s.arguments[-1].type, torch.TensorType)}
        assert lengths <= outs and not lengths & functional_tensor_last, name


def _flash(causal: bool, *, names: int = 17) -> Inputs:
    """An ``_flash_attention_forward`` call in [B, L, H, E] with ``is_causal`` at its schema's place (8): max_q
    and max_k, at 5 and 6, are ints that a read by position took for the flag."""
    types = ("c10::BFloat16",) * 3 + ("", "", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar") + ("",) * (names - 10)
    concrete = ("", "", "", "", "", "128", "128", "0.0", str(causal), "False") + ("",) * (names - 10)
    dims = ((2, 128, 8, 64),) * 3 + ((),) * (names - 3)
    return Inputs(tuple(d if i < 3 else None for i, d in enumerate(dims)), types, concrete)


@pytest.mark.parametrize("names", [17, 15], ids=["torch-2.13", "before-paged-kv"])
def test_causal_flash_attention_is_half_the_work_read_at_its_argument(names: int) -> None:
    full = op_cost("aten::_flash_attention_forward", _flash(False, names=names))
    causal = op_cost("aten::_flash_attention_forward", _flash(True, names=names))
    assert full is not None and causal is not None
    assert full.flops == 2.0 * 2 * 8 * 128 * 128 * (64 + 64)
    assert causal.flops == full.flops / 2


def _cudnn_backward(causal: bool) -> Inputs:
    """``_scaled_dot_product_cudnn_attention_backward`` as the bundled H200 trace records it (16 inputs): max_k at
    12, ``is_causal`` at 14."""
    q = (2, 8, 128, 64)
    types = ("c10::BFloat16",) * 5 + ("float", "long int", "long int", "", "", "", "Scalar", "Scalar", "Scalar",
                                      "Scalar", "")
    concrete = ("",) * 11 + ("128", "128", "0.0", "True" if causal else "False", "")
    dims = (q, q, q, q, q, (2, 8, 128, 1), (), (), None, None, None, None, None, None, None, None)
    return Inputs(dims, types, concrete)


def test_causal_cudnn_attention_backward_is_half_the_work() -> None:
    full, causal = (op_cost("aten::_scaled_dot_product_cudnn_attention_backward", _cudnn_backward(c))
                    for c in (False, True))
    assert full is not None and causal is not None
    assert full.flops == 2 * 2.0 * 2 * 8 * 128 * 128 * (64 + 64) and causal.flops == full.flops / 2


def test_an_attention_call_that_did_not_record_its_mask_is_not_counted() -> None:
    a = _flash(False)
    assert op_cost("aten::_flash_attention_forward", Inputs(a.dims, a.types, ())) is None


def test_a_transposed_convolution_backward_counts_by_its_input() -> None:
    """ConvTranspose2d(16 -> 8, 4x4, stride 2) on [2, 16, 10, 10]: output [2, 8, 20, 20], weight [16, 8, 4, 4];
    its forward is 2 x N x C_in x in-positions x C_out x kernel, whichever way the flag is recorded."""
    forward = 2.0 * 2 * 16 * 100 * 8 * 16
    types = ("float",) * 3 + ("ScalarList",) * 4 + ("Scalar", "ScalarList", "Scalar", "ScalarList")
    dims = ((2, 8, 20, 20), (2, 16, 10, 10), (16, 8, 4, 4), None, None, None, None, None, None, None, None)
    recorded = ("", "", "", "[8]", "[2, 2]", "[1, 1]", "[1, 1]", "True", "[0, 0]", "1", "[True, True, False]")
    for concrete in (recorded, ()):
        cost = op_cost("aten::convolution_backward", Inputs(dims, types, concrete))
        assert cost is not None and cost.flops == 2 * forward


def test_a_call_no_schema_fits_is_not_read_by_position() -> None:
    # conv2d recorded with a list where groups (an int) belongs: no schema of conv2d fits
    types = ("float", "float", "", "ScalarList", "ScalarList", "ScalarList", "ScalarList")
    assert bind("aten::conv2d", Inputs(((1, 3, 8, 8), (4, 3, 3, 3)) + (None,) * 5, types, ())) is None


def test_an_out_variant_of_addmm_counts_its_product() -> None:
    """``addmm.out`` as TraceLens's xDiT capture and HTA's MTIA trace record it: six inputs, the output last."""
    types = ("c10::BFloat16",) * 3 + ("Scalar", "Scalar", "c10::BFloat16")
    dims = ((3072,), (768, 3072), (3072, 3072), None, None, (768, 3072))
    cost = op_cost("aten::addmm", Inputs(dims, types, ("", "", "", "1", "1", "")))
    assert cost is not None and cost.flops == 2.0 * 768 * 3072 * 3072
