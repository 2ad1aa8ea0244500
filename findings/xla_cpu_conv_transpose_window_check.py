"""XLA's CPU compiler (jaxlib 0.10.2) aborts the process (SIGABRT) on a valid transposed convolution:
``F algebraic_simplifier.cc:586] Check failed: computation->Accept(this) is OK (INVALID_ARGUMENT: Window
dimensions do not match RHS shape ...)``.  JAX's shape rule accepts the program and the output shape is well
defined (torch computes it; where the compile does not abort, XLA's values match a numpy reference to 1e-7).

Mechanism (read from the HLO in the message and XLA's source): the simplifier's operand swap
(AlgebraicSimplifierVisitor::SwapConvOperands; on XLA's main the ConvOperandSwapper pass,
xla/hlo/transforms/simplifiers/conv_operand_swapper.cc) swaps input and kernel when the kernel's spatial product
is larger than the input's.  A spatial dimension with no padding, no reversal, window_dilation 1,
base_dilation == window size and stride == size - 1 is taken as a "group" dimension and its window is copied
unchanged into the swapped convolution, without checking that the input's size there equals the window size.
conv_transpose with stride 2, kernel 2 and pads (0, 0) lowers to exactly that window (size 2, lhs dilation 2,
stride 1); with an input of 3 (or 4) the copied window (size 2) does not match the new kernel (the input, size 3),
and the HLO verifier's CHECK kills the process.  Another axis whose kernel is larger than its input (input 2,
kernel 3) is what makes the swap look profitable.

Minimal shapes: ``jax.jit(jax.lax.conv_transpose)`` with x (1, 3, 2, 1) NHWC, w (2, 3, 1, 1) HWIO, strides
(2, 2), padding [(0, 0), (1, 1)], transpose_kernel=True; expected (1, 4, 3, 1).  It needs both axes: one with
pads (0, 0) and kernel == stride whose input differs from the kernel (input 3 or 4, kernel 2; input 2 runs) and
one whose kernel is larger than its input (input 2, kernel 3 or 5).  Either axis alone compiles and runs (the two
1-D controls below).  Keras' Conv3DTranspose on JAX reaches it through the explicit pads it computes for
padding="same" with an output_padding.

    python findings/xla_cpu_conv_transpose_window_check.py
    # prints REPRODUCED and exits 1 while the bug is there (plain JAX, no Keras; the jitted call runs in a
    # child process, since the abort kills it)

Versions: jax 0.10.2 / jaxlib 0.10.2 (CPU).  Upstream: not found (queries, issues corpus:
"algebraic_simplifier Window dimensions do not match RHS shape", "conv_transpose XLA CPU check failed", "XLA abort
conv_general_dilated padding kernel larger than input", "jax conv_transpose jit CPU SIGABRT Check failed
computation->Accept(this) convolution swap operands"; no match in jax-ml/jax or openxla/xla).  Nearest:
openxla/xla#48713 (open: XLA:CPU f32 convolution with negative low padding reads out of bounds; another conv bug),
openxla/xla#47346 (open: a GPU CHECK on convolution_dimension_numbers_), jax-ml/jax#4445 (2020, a test skipped for
"a known xla:cpu bug"; body not visible).  The group-dimension rule is unchanged in XLA's stored
conv_operand_swapper.cc (commit 80c095f, 2026: no input_size == window size check).
Found by audee: the api-cpu campaign, rng 2874 (api-Conv3DTranspose-v00004: Conv3DTranspose(9, [2, 3, 5],
strides=2, padding="same", output_padding=[0, 1, 0], data_format="channels_first") on (8, 3, 3, 5, 2), the first
case of its root).
"""
import subprocess
import sys

CHILD = r"""
import sys, jax, jax.numpy as jnp
spec = eval(sys.argv[1])                      # [(input length, kernel length, pad lo, pad hi), ...]
sp = "DHW"[-len(spec):]
x = jnp.ones((1, *[a[0] for a in spec], 1)); w = jnp.ones((*[a[1] for a in spec], 1, 1))
f = jax.jit(lambda x, w: jax.lax.conv_transpose(x, w, (2,) * len(spec), [(a[2], a[3]) for a in spec],
            dimension_numbers=("N" + sp + "C", sp + "IO", "N" + sp + "C"), transpose_kernel=True))
print("shape", tuple(f(x, w).shape))
"""


err_tail = ""


def run(spec):
    """Run the jitted conv_transpose of `spec` in a child: (returncode, stdout, the check failure or else the last
    stderr line, whether the check failed)."""
    p = subprocess.run([sys.executable, "-c", CHILD, repr(spec)], capture_output=True, text=True, timeout=300)
    err = [ln for ln in p.stderr.splitlines() if ln.strip()]
    check = [ln for ln in err if "Check failed" in ln]
    global err_tail
    err_tail = err[-1] if err else ""
    return p.returncode, p.stdout.strip(), (check or err or ["(no stderr)"])[-1], bool(check)


def expected(spec):
    # (L - 1) * stride + 1 (the dilated input) + pads - kernel + 1
    return (1, *[(a[0] - 1) * 2 + 1 + a[2] + a[3] - a[1] + 1 for a in spec], 1)


CASE = [(3, 2, 0, 0), (2, 3, 1, 1)]                 # the failing 2-D case
CONTROLS = [[(3, 2, 0, 0)], [(2, 3, 1, 1)]]        # each axis alone
for spec in CONTROLS:
    rc, out, last, _ = run(spec)
    print(f"control {spec}: rc {rc}, {out or last} (expected {expected(spec)})")

rc, out, last, check = run(CASE)
print(f"case {CASE}: x (1, 3, 2, 1), w (2, 3, 1, 1), strides (2, 2): rc {rc}, expected shape {expected(CASE)}")
print("child's last stderr line:", last[:400])
if check and err_tail:
    print("  (its very last line:", err_tail[:200] + ")")
if rc < 0 or rc >= 128 or check:
    sig = -rc if rc < 0 else rc - 128
    print(f"REPRODUCED: the jitted conv_transpose killed the process (signal {sig}) at XLA CPU compile"
          + ("; algebraic_simplifier Check failed" if check else ""))
    sys.exit(1)
if rc == 0 and out == f"shape {expected(CASE)}":
    print("NOT REPRODUCED:", out)
    sys.exit(0)
print("UNEXPECTED: rc", rc, out)
sys.exit(2)
