#!/usr/bin/env python3
"""One model per family of torchvision (every classification and segmentation family) and of
transformers' encoder-only models (text, vision, audio), for issue 34's "every family loads
without config.pbtxt and matches PyTorch".

This module is the catalogue and what both its users share, importable WITHOUT torch:
- FAMILIES: name -> (kind, input description); the builders (`build(name)`) import torch lazily;
- `feeds(inputs, rng, batch)`: inputs such models get (images, token ids from the vocabulary with
  padded attention masks, waveforms, spectrogram features), drawn from the graph's own inputs;
- `compare(got, want, rtol)`: the normwise comparison the zoo tests use (tests/integration's
  lib.assert_close: |a - e| <= rtol * |e| + rtol * max|e|), returning a message instead of raising.

export_families.py (torch) exports each family with both exporters; check_families.py serves the
exported graphs through inferd and compares with onnxruntime and PyTorch; families.sh runs both on
the GPU machine; tests/integration/test_zoo_families.py is CI's part (stripped graphs refilled).

Names: tv_<torchvision builder> and hf_<transformers model type>. Every model has random weights
(torchvision weights=None, transformers tiny configs built offline from their Config classes).
"""

import numpy as np

# kind: "image" (pixel_values / input NCHW float), "text" (input_ids + attention_mask int64),
# "audio" (raw waveform [batch, samples]), "spectrogram" (features [batch, frames, bins] or
# Whisper's [batch, mels, frames]).
TV_CLS = ["alexnet", "vgg11", "resnet18", "resnext50_32x4d", "wide_resnet50_2", "squeezenet1_0", "densenet121",
          "inception_v3", "googlenet", "shufflenet_v2_x0_5", "mobilenet_v2", "mobilenet_v3_small", "mnasnet0_5",
          "efficientnet_b0", "efficientnet_v2_s", "regnet_y_400mf", "convnext_tiny", "vit_b_16", "swin_t",
          "swin_v2_t", "maxvit_t"]
TV_SEG = ["fcn_resnet50", "deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large"]
HF_TEXT = ["bert", "roberta", "distilbert", "albert", "electra", "deberta", "deberta-v2", "xlm-roberta", "mpnet",
           "camembert", "mobilebert", "convbert", "modernbert"]
HF_VISION = ["vit", "deit", "beit", "swin", "convnext", "dinov2", "clip_vision_model", "siglip_vision_model"]
HF_AUDIO = ["wav2vec2", "hubert", "wavlm", "whisper_encoder", "audio-spectrogram-transformer"]

# more encoder-only families, built generically (AutoConfig.for_model + AutoModel.from_config) from
# tiny settings; their outputs are the tensors the model returns
_TXT = dict(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
            max_position_embeddings=64)
_VIT = dict(image_size=32, patch_size=8, num_channels=3, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=128)
_W2V = dict(vocab_size=32, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
            conv_dim=(32, 32, 32), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16,
            num_conv_pos_embedding_groups=4)
HF_MORE = {
    # text
    "ernie": ("text", _TXT), "roformer": ("text", dict(_TXT, embedding_size=64)), "data2vec-text": ("text", _TXT),
    "squeezebert": ("text", dict(_TXT, embedding_size=64)),
    "megatron-bert": ("text", _TXT), "fnet": ("text", _TXT), "esm": ("text", dict(_TXT, pad_token_id=1, mask_token_id=2)),
    "rembert": ("text", dict(_TXT, input_embedding_size=32, output_embedding_size=32)), "ibert": ("text", _TXT),
    # vision
    "data2vec-vision": ("image", _VIT), "vit_msn": ("image", _VIT), "dinov2_with_registers": ("image", _VIT),
    "swinv2": ("image", dict(image_size=32, patch_size=2, embed_dim=16, depths=[1, 1], num_heads=[2, 4], window_size=4)),
    "convnextv2": ("image", dict(num_channels=3, hidden_sizes=[16, 32], depths=[1, 1], num_stages=2)),
    "resnet": ("image", dict(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type="basic")),
    "mobilevit": ("image", dict(image_size=64)), "segformer": ("image", {}), "pvt": ("image", dict(image_size=64)),
    "focalnet": ("image", dict(image_size=32, patch_size=2, embed_dim=16, depths=[1, 1], focal_levels=[2, 2],
                               focal_windows=[3, 3])),
    "levit": ("image", dict(image_size=64, hidden_sizes=[32, 64, 96], num_attention_heads=[2, 2, 2],
                            depths=[1, 1, 1], key_dim=[8, 8, 8])),
    # audio
    "data2vec-audio": ("audio", _W2V), "unispeech": ("audio", _W2V), "unispeech-sat": ("audio", _W2V),
    "wav2vec2-conformer": ("audio", _W2V), "sew": ("audio", dict(_W2V, squeeze_factor=2)),
    "sew-d": ("audio", dict(_W2V, squeeze_factor=2, position_buckets=16, max_relative_positions=32)),
}
MORE_IMAGE_SIZE = {"mobilevit": 64, "pvt": 64, "levit": 64, "segformer": 64}

# torchvision input sizes: 224 where the architecture fixes it (ViT, Swin, MaxViT, and the
# classifiers whose adaptive pooling the TorchScript exporter only writes for exact divisors:
# AlexNet, VGG), smaller elsewhere so the CPU run stays short.
TV_SIZE = {"alexnet": 224, "vgg11": 224, "vit_b_16": 224, "swin_t": 224, "swin_v2_t": 224, "maxvit_t": 224,
           "inception_v3": 160}
TV_DEFAULT_SIZE = 128
SEG_SIZE = 96

HF_SEQ = 12  # token sequence length of the export example and the feeds
AUDIO_SAMPLES = 3200  # 0.2 s at 16 kHz
AST_FRAMES, AST_BINS = 64, 32
WHISPER_MELS, WHISPER_FRAMES = 16, 40


def tv(name):
    return "tv_" + name


def hf(name):
    return "hf_" + name.replace("-", "_")


FAMILIES = {}
for _n in TV_CLS:
    FAMILIES[tv(_n)] = ("image", TV_SIZE.get(_n, TV_DEFAULT_SIZE))
for _n in TV_SEG:
    FAMILIES[tv(_n)] = ("image", SEG_SIZE)
for _n in HF_TEXT:
    FAMILIES[hf(_n)] = ("text", HF_SEQ)
for _n in HF_VISION:
    FAMILIES[hf(_n)] = ("image", 32)
for _n in HF_AUDIO:
    FAMILIES[hf(_n)] = ("audio", None)
for _n, (_k, _) in HF_MORE.items():
    FAMILIES[hf(_n)] = (_k, HF_SEQ if _k == "text" else MORE_IMAGE_SIZE.get(_n, 32) if _k == "image" else None)
FAMILIES[hf("whisper_encoder")] = ("spectrogram", (WHISPER_MELS, WHISPER_FRAMES))
FAMILIES[hf("audio-spectrogram-transformer")] = ("spectrogram", (AST_FRAMES, AST_BINS))

EXPORTERS = [("ts", 17), ("dynamo", 18)]  # torch.onnx.export dynamo=False at opset 17, dynamo=True at 18


def graph_name(model, exporter, opset):
    return "%s.%s%d" % (model, exporter, opset)


# --- feeds (numpy only)

VOCAB = 1000  # every tiny text config's vocabulary


def feeds(inputs, rng, batch, seq=HF_SEQ):
    """inputs: [{"name", "elem" (ONNX elem type), "dims" (graph dims, -1 dynamic)}]. Token ids in
    [0, VOCAB), an attention mask of 1s with trailing 0s (row 0 full, the others shorter), other
    integers 0/1, floats N(0, 1) (waveforms and features included)."""
    lengths = rng.integers(max(2, seq // 2), seq + 1, batch)
    lengths[0] = seq
    out = {}
    for t in inputs:
        dims = [batch] + [seq if d == -1 else d for d in t["dims"][1:]]
        name, elem = t["name"], t["elem"]
        if elem in (6, 7):  # INT32, INT64
            dt = np.int64 if elem == 7 else np.int32
            if "mask" in name:
                a = (np.arange(dims[1])[None, :] < lengths[:, None]).astype(dt)
            elif "ids" in name and "type" not in name:
                a = rng.integers(3, VOCAB, dims).astype(dt)
            else:
                a = np.zeros(dims, dt)
        elif elem == 9:
            a = np.arange(dims[1])[None, :] < lengths[:, None]
        else:
            a = rng.standard_normal(dims).astype({1: np.float32, 10: np.float16, 11: np.float64}[elem])
        out[name] = a
    return out


def dynamic_length(name):
    """The length feeds give a family's dynamic non-batch dims: tokens, or waveform samples."""
    kind = FAMILIES.get(name, ("text", HF_SEQ))[0]
    return AUDIO_SAMPLES if kind == "audio" else HF_SEQ


def np_of_elem(elem):
    return {1: np.float32, 10: np.float16, 11: np.float64, 6: np.int32, 7: np.int64, 9: np.bool_, 2: np.uint8}[elem]


def compare(got, want, rtol):
    """None when got matches want normwise (lib.assert_close's rule), else the reason."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return "shape %s, expected %s" % (list(got.shape), list(want.shape))
    if np.issubdtype(want.dtype, np.integer) or want.dtype == np.bool_:
        bad = int(np.sum(got != want))
        return None if bad == 0 else "%d of %d integer elements differ" % (bad, want.size)
    g, w = got.astype(np.float64), want.astype(np.float64)
    if not np.all(np.isfinite(w)):
        return "the oracle's output holds non-finite values"
    scale = float(np.max(np.abs(w))) if w.size else 0.0
    err = np.abs(g - w) - rtol * np.abs(w)
    worst = float(np.max(err)) if w.size else 0.0
    if not np.all(np.isfinite(g)) or worst > rtol * max(scale, 1e-30):
        rel = float(np.max(np.abs(g - w))) / max(scale, 1e-30)
        return "max |diff| / max |want| = %.3g (rtol %.0e)" % (rel, rtol)
    return None


# --- builders (torch)

def _wrap(model, in_names, out_keys):
    """The transformers model with positional tensors in and a tuple out, as the exporters want."""
    import torch

    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def run(self, xs):
            out = self.m(**dict(zip(in_names, xs)))
            return tuple(out[k] for k in out_keys)

    class Wrapped1(Wrapped):  # fixed arity: torch.export matches dynamic_shapes to the arguments
        def forward(self, a):
            return self.run((a,))

    class Wrapped2(Wrapped):
        def forward(self, a, b):
            return self.run((a, b))

    return Wrapped1() if len(in_names) == 1 else Wrapped2()


def _tiny_text(tf, kind):
    common = dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=128, max_position_embeddings=64)
    if kind == "bert":
        return tf.BertModel(tf.BertConfig(**common))
    if kind == "roberta":
        return tf.RobertaModel(tf.RobertaConfig(**common))
    if kind == "camembert":
        return tf.CamembertModel(tf.CamembertConfig(**common))
    if kind == "xlm-roberta":
        return tf.XLMRobertaModel(tf.XLMRobertaConfig(**common))
    if kind == "distilbert":
        return tf.DistilBertModel(tf.DistilBertConfig(vocab_size=VOCAB, dim=64, n_layers=2, n_heads=4,
                                                      hidden_dim=128, max_position_embeddings=64))
    if kind == "albert":
        return tf.AlbertModel(tf.AlbertConfig(embedding_size=32, **common))
    if kind == "electra":
        return tf.ElectraModel(tf.ElectraConfig(embedding_size=32, **common))
    if kind == "deberta":
        return tf.DebertaModel(tf.DebertaConfig(relative_attention=True, pos_att_type=["c2p", "p2c"],
                                                max_relative_positions=32, **common))
    if kind == "deberta-v2":
        return tf.DebertaV2Model(tf.DebertaV2Config(relative_attention=True, pos_att_type=["c2p", "p2c"],
                                                    position_buckets=16, max_relative_positions=32, **common))
    if kind == "mpnet":
        return tf.MPNetModel(tf.MPNetConfig(**common))
    if kind == "mobilebert":
        return tf.MobileBertModel(tf.MobileBertConfig(vocab_size=VOCAB, hidden_size=64, embedding_size=32,
                                                      num_hidden_layers=2, num_attention_heads=4,
                                                      intermediate_size=64, intra_bottleneck_size=32,
                                                      true_hidden_size=32, max_position_embeddings=64))
    if kind == "convbert":
        return tf.ConvBertModel(tf.ConvBertConfig(embedding_size=64, **common))
    if kind == "modernbert":
        return tf.ModernBertModel(tf.ModernBertConfig(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2,
                                                      num_attention_heads=4, intermediate_size=128,
                                                      max_position_embeddings=64, pad_token_id=0,
                                                      bos_token_id=1, eos_token_id=2, cls_token_id=1,
                                                      sep_token_id=2, global_attn_every_n_layers=2,
                                                      local_attention=8))
    raise KeyError(kind)


def _tiny_vision(tf, kind):
    vit = dict(image_size=32, patch_size=8, num_channels=3, hidden_size=64, num_hidden_layers=2,
               num_attention_heads=4, intermediate_size=128)
    if kind == "vit":
        return tf.ViTModel(tf.ViTConfig(**vit))
    if kind == "deit":
        return tf.DeiTModel(tf.DeiTConfig(**vit))
    if kind == "beit":
        return tf.BeitModel(tf.BeitConfig(use_relative_position_bias=True, use_mean_pooling=True, **vit))
    if kind == "dinov2":
        return tf.Dinov2Model(tf.Dinov2Config(**vit))
    if kind == "clip_vision_model":
        return tf.CLIPVisionModel(tf.CLIPVisionConfig(**vit))
    if kind == "siglip_vision_model":
        return tf.SiglipVisionModel(tf.SiglipVisionConfig(**vit))
    if kind == "swin":
        return tf.SwinModel(tf.SwinConfig(image_size=32, patch_size=2, embed_dim=16, depths=[1, 1],
                                          num_heads=[2, 4], window_size=4))
    if kind == "convnext":
        return tf.ConvNextModel(tf.ConvNextConfig(num_channels=3, hidden_sizes=[16, 32], depths=[1, 1],
                                                  patch_size=4, num_stages=2))
    raise KeyError(kind)


def _tiny_audio(tf, kind):
    w2v = dict(vocab_size=32, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
               conv_dim=(32, 32, 32), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16,
               num_conv_pos_embedding_groups=4)
    if kind == "wav2vec2":
        return tf.Wav2Vec2Model(tf.Wav2Vec2Config(**w2v))
    if kind == "hubert":
        return tf.HubertModel(tf.HubertConfig(**w2v))
    if kind == "wavlm":
        return tf.WavLMModel(tf.WavLMConfig(num_buckets=32, max_bucket_distance=64, **w2v))
    if kind == "whisper_encoder":
        cfg = tf.WhisperConfig(vocab_size=VOCAB, num_mel_bins=WHISPER_MELS, encoder_layers=2,
                               encoder_attention_heads=4, decoder_layers=1, decoder_attention_heads=4,
                               d_model=64, encoder_ffn_dim=128, decoder_ffn_dim=128,
                               max_source_positions=WHISPER_FRAMES // 2, max_target_positions=32,
                               pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)
        return tf.WhisperModel(cfg).get_encoder()
    if kind == "audio-spectrogram-transformer":
        return tf.ASTModel(tf.ASTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                        intermediate_size=128, patch_size=16, frequency_stride=8, time_stride=8,
                                        max_length=AST_FRAMES, num_mel_bins=AST_BINS))
    raise KeyError(kind)


def build(name, batch=2):
    """(torch module in eval mode, example args, input names, output names, dynamic axes {input: [axis...]})
    for the family `name`, random weights (seed it before calling)."""
    import torch
    kind, size = FAMILIES[name]
    if name.startswith("tv_"):
        import torchvision
        short = name[3:]
        if short in TV_SEG:
            m = getattr(torchvision.models.segmentation, short)(weights=None, weights_backbone=None,
                                                               num_classes=21, aux_loss=False)
            m = _seg_out(m)
            outs = ["out"]
        else:
            kw = {"init_weights": True} if short in ("inception_v3", "googlenet") else {}
            if short in ("inception_v3", "googlenet"):
                kw["aux_logits"] = False
            m = getattr(torchvision.models, short)(weights=None, **kw)
            outs = ["logits"]
        m.eval()
        return m, (torch.randn(batch, 3, size, size),), ["input"], outs, {"input": [0]}
    import transformers as tf
    short = name[3:].replace("_", "-")
    more = next((k for k in HF_MORE if hf(k) == name), None)
    if more is not None:
        return _build_more(tf, more, kind, size, batch)
    if kind == "text":
        short = next(k for k in HF_TEXT if hf(k) == name)
        m = _tiny_text(tf, short)
        ids = torch.randint(3, VOCAB, (batch, size))
        mask = torch.ones_like(ids)
        mask[1:, size - 3:] = 0
        in_names = ["input_ids", "attention_mask"]
        outs = ["last_hidden_state"] + (["pooler_output"] if short in ("bert", "roberta", "camembert", "xlm-roberta",
                                                                        "albert", "mpnet", "mobilebert") else [])
        w = _wrap(m.eval(), in_names, outs)
        return w.eval(), (ids, mask), in_names, outs, {"input_ids": [0, 1], "attention_mask": [0, 1]}
    if kind == "image":
        short = next(k for k in HF_VISION if hf(k) == name)
        m = _tiny_vision(tf, short).eval()
        outs = ["last_hidden_state", "pooler_output"]
        w = _wrap(m, ["pixel_values"], outs)
        return w.eval(), (torch.randn(batch, 3, size, size),), ["pixel_values"], outs, {"pixel_values": [0]}
    short = next(k for k in HF_AUDIO if hf(k) == name)
    m = _tiny_audio(tf, short).eval()
    if short == "whisper_encoder":
        w = _wrap(m, ["input_features"], ["last_hidden_state"])
        return (w.eval(), (torch.randn(batch, WHISPER_MELS, WHISPER_FRAMES),), ["input_features"],
                ["last_hidden_state"], {"input_features": [0]})
    if short == "audio-spectrogram-transformer":
        outs = ["last_hidden_state", "pooler_output"]
        w = _wrap(m, ["input_values"], outs)
        return w.eval(), (torch.randn(batch, AST_FRAMES, AST_BINS),), ["input_values"], outs, {"input_values": [0]}
    w = _wrap(m, ["input_values"], ["last_hidden_state"])
    return (w.eval(), (torch.randn(batch, AUDIO_SAMPLES),), ["input_values"], ["last_hidden_state"],
            {"input_values": [0, 1]})


def _seg_out(model):
    """torchvision's segmentation models return an OrderedDict; the exporters want a tensor."""
    import torch

    class SegOut(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, x):
            return self.m(x)["out"]

    return SegOut()


def seed_of(name):
    """The torch seed a family's weights and example inputs are drawn with (stable across runs)."""
    import zlib
    return zlib.crc32(name.encode()) % 100000


def _build_more(tf, short, kind, size, batch):
    """HF_MORE's families: AutoModel from a tiny AutoConfig; outputs: the tensors it returns."""
    import torch
    cfg = tf.AutoConfig.for_model(short, **HF_MORE[short][1])
    m = tf.AutoModel.from_config(cfg).eval()
    if kind == "text":
        ids = torch.randint(3, VOCAB, (batch, size))
        mask = torch.ones_like(ids)
        mask[1:, size - 3:] = 0
        args, in_names, dyn = (ids, mask), ["input_ids", "attention_mask"], {"input_ids": [0, 1],
                                                                              "attention_mask": [0, 1]}
    elif kind == "image":
        args, in_names, dyn = (torch.randn(batch, 3, size, size),), ["pixel_values"], {"pixel_values": [0]}
    else:
        args, in_names, dyn = (torch.randn(batch, AUDIO_SAMPLES),), ["input_values"], {"input_values": [0, 1]}
    with torch.no_grad():
        out = m(**dict(zip(in_names, args)))
    outs = [k for k in ("last_hidden_state", "pooler_output") if isinstance(out.get(k), torch.Tensor)]
    return _wrap(m, in_names, outs).eval(), args, in_names, outs, dyn
