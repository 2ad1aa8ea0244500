"""torch 2.13 on the CPU: ``F.interpolate(..., antialias=True)`` (bilinear or bicubic) of a float
tensor to an output **width of 1** writes output row 0 into every output row whenever the height
changes: ``F.interpolate(torch.arange(4.).reshape(1, 1, 4, 1), size=(2, 1), mode='bilinear',
antialias=True)`` is ``[0.714, 0.714]`` where the same resize run on the transposed tensor (height
1) gives ``[0.714, 2.286]``, as TensorFlow's and JAX's antialiased resizes do.  Without
antialias, or with an output width above 1, it is right.  Keras' torch backend meets it in
``Resizing(antialias=True)`` and ``ops.image.resize(antialias=True)`` to a width of 1 (the
api-cpu campaign, rng 2840: Resizing(bicubic, antialias=True, 13x5 -> 4x1) on torch all zeros
where its padded row 0 is fill; TensorFlow and JAX agree to 1e-7).

    python findings/torch_interpolate_antialias_width1.py
    # prints REPRODUCED and exits 1 while the bug is there (torch alone, no Keras)

Versions: torch 2.13.0+cpu.  Not found upstream (queries: "F.interpolate antialias=True output
width 1 wrong result all rows equal", "pytorch _upsample_bilinear2d_aa output size 1 incorrect
separable antialias CPU kernel", "interpolate antialias downsample to single column width=1
returns first row repeated"); related, not the same: pytorch/pytorch#101403 (a wrong line at
some scales without antialias, fixed), #30565 (bilinear to 1x1 without antialias).
"""
import sys

import torch
import torch.nn.functional as F

x = torch.arange(4.0).reshape(1, 1, 4, 1)
wrong = []
for mode in ("bilinear", "bicubic"):
    got = F.interpolate(x, size=(2, 1), mode=mode, antialias=True).flatten().tolist()
    # the same resize along the other axis: a height of 1, the width resized (right on every build)
    want = F.interpolate(x.transpose(2, 3).contiguous(), size=(1, 2), mode=mode, antialias=True).flatten().tolist()
    print(f"{mode}: width 1 {[round(v, 4) for v in got]}, transposed {[round(v, 4) for v in want]}")
    if abs(got[1] - want[1]) > 1e-4:
        wrong.append(mode)
print(f"torch {torch.__version__}")
if wrong:
    print(f"REPRODUCED: antialiased {', '.join(wrong)} resize to width 1 repeats output row 0")
    sys.exit(1)
print("NOT REPRODUCED")
sys.exit(0)
