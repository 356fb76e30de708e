"""Issue 34's families, CI's part: one model per torchvision classification and segmentation family
and per transformers encoder-only family (text, vision, audio; tiny random configs), as torch's two
exporters wrote them (tests/models/zoo/families/: TorchScript-based at opset 17, dynamo at 18,
weights stripped, gzipped: 1.4 MB for the 150 graphs; exported by export_families.py), weights refilled here by fill.py, served by the
real server WITHOUT config.pbtxt and compared with onnxruntime on the CPU (families.compare, normwise
rtol 1e-4, the zoo tests' rule), at batch 2 and, where auto-complete gave a batch dimension, batch 1;
every graph keeps a dynamic batch axis, so auto-complete must give max_batch_size 4.

PyTorch as the oracle, GPU instances and the graphs left out here run on the GPU machine:
tests/models/zoo/families.sh (check_families.py is the driver both use).

By default the graphs whose CPU time is small run (CI: 2 cores); INFERD_FAMILIES=all serves every
committed graph, INFERD_FAMILIES=name[,name] some. KNOWN lists the graphs that do not load or do not
match yet, with the reason (docs/models.md's families table): they are strict xfails, so a fix that
makes one pass must move it out of the list.
"""

import os
import sys

import pytest

import inferd_testlib as lib

sys.path.insert(0, os.path.join(lib.REPO_ROOT, "tests", "models", "zoo"))
import check_families  # noqa: E402
import families  # noqa: E402

GRAPHS = os.path.join(lib.REPO_ROOT, "tests", "models", "zoo", "families")
# left out by default: CPU-heavy at their export size on CI's 2 cores (seconds each); INFERD_FAMILIES=all
HEAVY = {"tv_vgg11", "tv_alexnet", "tv_wide_resnet50_2", "tv_resnext50_32x4d", "tv_fcn_resnet50", "tv_vit_b_16",
         "tv_maxvit_t", "tv_swin_v2_t", "tv_swin_t", "tv_convnext_tiny", "tv_efficientnet_v2_s", "tv_densenet121",
         "tv_inception_v3"}
KNOWN = {}  # graph -> why it does not load / match yet (none on the CPU today)
# fill.py's random weights (no BatchNormalization left to rescale: the exporters fold it into the
# convolutions) make these deep nets overflow or chaotic: onnxruntime's own logits are inf/NaN
# (DenseNet-121 ts17, MaxViT ts17, LeViT ts17) or reach 1e6 through EfficientNetV2's residual and
# squeeze-excitation blocks, where sigmoids saturate and a last-bit difference flips them. With
# torch's own initialisation they match onnxruntime and PyTorch to 1e-4 (families.sh); here they
# are skipped, saying so, when INFERD_FAMILIES selects them.
FILL_UNSTABLE = {"tv_densenet121.ts17", "tv_maxvit_t.ts17", "hf_levit.ts17", "tv_efficientnet_v2_s.ts17",
                 "tv_efficientnet_v2_s.dynamo18"}


def _committed():
    if not os.path.isdir(GRAPHS):
        return {}
    return check_families.list_graphs(GRAPHS)


def _wanted():
    have = _committed()
    env = os.environ.get("INFERD_FAMILIES", "")
    if env == "all":
        return have
    if env:
        names = env.split(",")
        return {g: p for g, p in have.items() if g in names or g.split(".")[0] in names}
    return {g: p for g, p in have.items() if g.split(".")[0] not in HEAVY}


def _params():
    out = []
    for g in sorted(_wanted()):
        if g in KNOWN:
            out.append(pytest.param(g, marks=pytest.mark.xfail(reason=KNOWN[g], strict=True)))
        elif g in FILL_UNSTABLE:
            out.append(pytest.param(g, marks=pytest.mark.skip(
                reason="fill.py's random weights make this net overflow or chaotic (see FILL_UNSTABLE); "
                       "families.sh checks it with torch's weights")))
        else:
            out.append(g)
    return out


@pytest.fixture(scope="module")
def fam(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("families_repo"))
    spec = check_families.write_repo(d, _wanted(), "none")
    for name in os.listdir(d):
        assert not os.path.exists(os.path.join(d, name, "config.pbtxt")), name
    srv_gen = lib.served(d, ["--strict-readiness", "false"])
    srv = next(srv_gen)
    yield spec, srv, {}
    next(srv_gen, None)


def test_every_family_has_both_exports_committed():
    """Each family of the catalogue has a committed graph per exporter, or a recorded reason it has not."""
    import json
    have = _committed()
    with open(os.path.join(GRAPHS, "export.json")) as f:
        exported = json.load(f)
    for fam_name in families.FAMILIES:
        for e, o in families.EXPORTERS:
            g = families.graph_name(fam_name, e, o)
            r = exported.get(g)
            assert r is not None, "%s: not in export.json" % g
            assert (g in have) == bool(r.get("exported")), (g, r)
            if not r.get("exported"):
                assert r.get("error"), g


@pytest.mark.parametrize("graph", _params())
def test_family_serves_like_onnxruntime(fam, graph):
    spec, srv, sessions = fam
    r = check_families.check_one(srv, graph, spec[graph], None, sessions)
    assert r["loads"], "%s does not load: %s" % (graph, r.get("why"))
    assert r["ort"], "%s: %s" % (graph, r.get("why"))
    assert "why" not in r, r["why"]
    # auto-complete read the batch axis the exporters left dynamic: Triton's default max_batch_size 4
    dynamic = all(t["dims"] and t["dims"][0] == -1 for t in spec[graph]["inputs"] + spec[graph]["outputs"])
    assert r["max_batch_size"] == (4 if dynamic else 0), (graph, r["max_batch_size"], spec[graph])
    assert dynamic, "%s: the exporter fixed the batch axis (export.json says which axes it kept)" % graph
