"""Conformance rows of ``torch.nn.functional``: padding, resampling, activations, vector
functions, losses, convolutions, normalization, pooling and the other layer functions."""

from __future__ import annotations

from row import ALL_DTYPES, FLOAT_DTYPES, Lit, Row, T

F = "nn.functional."
INDEX = dict(dtype="int64", domain="index", grad=False)


def _target(shape: tuple[int, ...] = (3,), classes: int = 4) -> T:
    return T(shape=shape, high=classes, **INDEX)


ROWS = [
    # padding
    *(Row(F + "pad", (T(), Lit(pads)), {"mode": Lit(mode)}, shape=shape, name=f"{mode}-{len(pads) // 2}d",
          dtypes=ALL_DTYPES if mode == "constant" else FLOAT_DTYPES)
      for mode in ("constant", "reflect", "replicate", "circular")
      for pads, shape in (((1, 2), (2, 3, 5)), ((2, 1, 0, 3), (2, 3, 4, 5)), ((1, 1, 2, 0, 1, 2), (1, 2, 3, 4, 5)))),
    Row(F + "pad", (T(), Lit((-1, 2, 1, -2))), {"value": Lit(3.0)}, shape=(2, 3, 4, 5), name="constant-crop-value"),
    Row(F + "pad", (T(), Lit((1,))), shape=(2, 3), name="odd-length", dtypes=("float32",)),
    # resampling
    Row(F + "pixel_shuffle", (T(), Lit(2)), shape=(2, 8, 3, 4)),
    Row(F + "pixel_unshuffle", (T(), Lit(2)), shape=(2, 3, 4, 6)),
    *(Row(F + "interpolate", (T(),), dict(kwargs, mode=Lit(mode)), shape=(2, 3, 4, 5), dtypes=FLOAT_DTYPES,
          name=f"{mode}-{name}")
      for mode in ("nearest", "nearest-exact")
      for name, kwargs in (("scale2", {"scale_factor": Lit(2)}), ("size", {"size": Lit((5, 7))}))),
    *(Row(F + "interpolate", (T(),), {"size": Lit((5, 7)), "mode": Lit("bilinear"), "align_corners": Lit(ac)},
          shape=(2, 3, 4, 5), dtypes=FLOAT_DTYPES, name=f"bilinear-align{ac}") for ac in (False, True)),
    Row(F + "interpolate", (T(),), {"scale_factor": Lit(2), "mode": Lit("linear")}, shape=(2, 3, 5),
        dtypes=FLOAT_DTYPES, name="linear"),
    Row(F + "interpolate", (T(),), {"size": Lit((3, 2)), "mode": Lit("area")}, shape=(2, 3, 7, 5),
        dtypes=FLOAT_DTYPES, name="area"),
    # activations
    Row(F + "elu", (T(),), {"alpha": Lit(0.5)}),
    Row(F + "elu", (T(),), {"inplace": Lit(True)}, name="inplace", grad=False),
    Row(F + "prelu", (T(), T(shape=(3,))), shape=(2, 3, 4), dtypes=FLOAT_DTYPES),
    Row(F + "prelu", (T(), T(shape=(1,))), shape=(5,), dtypes=FLOAT_DTYPES, name="shared"),
    Row(F + "relu"),
    Row(F + "leaky_relu", (T(), Lit(0.2))),
    Row(F + "gelu", dtypes=FLOAT_DTYPES),
    Row(F + "gelu", (T(),), {"approximate": Lit("tanh")}, dtypes=FLOAT_DTYPES, name="tanh"),
    Row(F + "silu", dtypes=FLOAT_DTYPES),
    Row(F + "mish", dtypes=FLOAT_DTYPES),
    Row(F + "softplus", dtypes=FLOAT_DTYPES),
    Row(F + "softplus", (T(),), {"beta": Lit(3.0), "threshold": Lit(2.0)}, dtypes=FLOAT_DTYPES, name="beta-threshold"),
    Row(F + "softmax", (T(), Lit(1)), dtypes=FLOAT_DTYPES),
    Row(F + "log_softmax", (T(), Lit(-1)), dtypes=FLOAT_DTYPES),
    Row(F + "sigmoid", dtypes=FLOAT_DTYPES),
    Row(F + "tanh", dtypes=FLOAT_DTYPES),
    # vector functions
    Row(F + "normalize", dtypes=FLOAT_DTYPES),
    Row(F + "normalize", (T(),), {"p": Lit(1.0), "dim": Lit(0)}, dtypes=FLOAT_DTYPES, name="p1-dim0"),
    Row(F + "cosine_similarity", (T(), T()), dtypes=FLOAT_DTYPES),
    Row(F + "cosine_similarity", (T(), T(shape=(1, 4))), {"dim": Lit(0)}, dtypes=FLOAT_DTYPES, name="broadcast"),
    Row(F + "pairwise_distance", (T(), T()), dtypes=FLOAT_DTYPES),
    Row(F + "one_hot", (T(high=5, **INDEX),), {"num_classes": Lit(6)}, dtypes=("int64",)),
    Row(F + "one_hot", (T(domain="index", high=5, grad=False),), name="dtypes"),
    # losses
    Row(F + "binary_cross_entropy", (T(), T(domain="unit", grad=False)), domain="unit", dtypes=FLOAT_DTYPES,
        name="refused-negative"),
    Row(F + "binary_cross_entropy_with_logits", (T(), T(domain="unit")), dtypes=FLOAT_DTYPES),
    Row(F + "binary_cross_entropy_with_logits", (T(), T(domain="unit")),
        {"pos_weight": T(shape=(4,), domain="positive", grad=False), "reduction": Lit("sum")},
        dtypes=FLOAT_DTYPES, name="pos_weight"),
    Row(F + "smooth_l1_loss", (T(), T()), dtypes=FLOAT_DTYPES),
    Row(F + "smooth_l1_loss", (T(), T()), {"beta": Lit(0.5), "reduction": Lit("none")}, dtypes=FLOAT_DTYPES,
        name="beta"),
    Row(F + "huber_loss", (T(), T()), {"delta": Lit(2.0)}, dtypes=FLOAT_DTYPES),
    Row(F + "kl_div", (T(), T(domain="positive")), {"reduction": Lit("batchmean")}, dtypes=FLOAT_DTYPES),
    Row(F + "kl_div", (T(), T()), {"reduction": Lit("sum"), "log_target": Lit(True)}, dtypes=FLOAT_DTYPES,
        name="log_target"),
    Row(F + "mse_loss", (T(), T()), dtypes=FLOAT_DTYPES),
    Row(F + "l1_loss", (T(), T()), dtypes=FLOAT_DTYPES),
    Row(F + "cross_entropy", (T(), _target()), dtypes=FLOAT_DTYPES),
    Row(F + "cross_entropy", (T(), _target()), {"label_smoothing": Lit(0.1)}, dtypes=FLOAT_DTYPES, name="smoothing"),
    Row(F + "nll_loss", (T(), _target()), dtypes=FLOAT_DTYPES),
    # convolution, pooling, normalization, linear layers
    Row(F + "conv2d", (T(), T(shape=(4, 3, 3, 3)), T(shape=(4,))), {"padding": Lit(1)}, shape=(2, 3, 5, 6),
        dtypes=FLOAT_DTYPES),
    Row(F + "conv_transpose2d", (T(), T(shape=(4, 3, 3, 3)), T(shape=(3,))),
        {"stride": Lit(2), "padding": Lit(1), "output_padding": Lit(1)}, shape=(2, 4, 5, 6), dtypes=FLOAT_DTYPES),
    Row(F + "conv_transpose2d", (T(), T(shape=(4, 2, 3, 2))), {"groups": Lit(2), "dilation": Lit(2)},
        shape=(2, 4, 5, 6), dtypes=FLOAT_DTYPES, name="groups-dilation"),
    Row(F + "instance_norm", (T(),), shape=(2, 3, 4, 5), dtypes=FLOAT_DTYPES),
    Row(F + "instance_norm", (T(),), {"weight": T(shape=(3,)), "bias": T(shape=(3,))}, shape=(2, 3, 4, 5),
        dtypes=FLOAT_DTYPES, name="affine"),
    Row(F + "layer_norm", (T(), Lit((4,))), dtypes=FLOAT_DTYPES),
    Row(F + "rms_norm", (T(), Lit((4,)), T(shape=(4,))), dtypes=FLOAT_DTYPES),
    Row(F + "group_norm", (T(), Lit(2)), shape=(2, 4, 3), dtypes=FLOAT_DTYPES),
    Row(F + "batch_norm", (T(), T(shape=(3,), grad=False), T(shape=(3,), domain="positive", grad=False)),
        shape=(2, 3, 4), dtypes=FLOAT_DTYPES),
    Row(F + "max_pool2d", (T(), Lit(2)), shape=(2, 3, 4, 6), domain="distinct", dtypes=FLOAT_DTYPES),
    Row(F + "avg_pool2d", (T(), Lit(2)), shape=(2, 3, 4, 6), dtypes=FLOAT_DTYPES),
    Row(F + "adaptive_avg_pool2d", (T(), Lit((2, 3))), shape=(2, 3, 4, 6), dtypes=FLOAT_DTYPES),
    Row(F + "linear", (T(), T(shape=(5, 4)), T(shape=(5,))), dtypes=FLOAT_DTYPES),
    Row(F + "embedding", (T(high=6, **INDEX), T(shape=(6, 3))), shape=(2, 4), dtypes=FLOAT_DTYPES),
    Row(F + "dropout", (T(),), {"p": Lit(0.5)}, dtypes=FLOAT_DTYPES, values=False, grad=False),
]
