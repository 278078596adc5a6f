"""Cube mesh layout of the reference cube and the ``<stem>.cube_mesh.yaml`` cache."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import pytest
import yaml

from kernbench.topology import mesh_gen
from kernbench.topology.spec import load_spec

REPO = Path(__file__).resolve().parents[1]
DEFAULT_TOPOLOGY = REPO / "config" / "topologies" / "default.yaml"


@pytest.fixture(scope="module")
def default_doc() -> dict:
    with DEFAULT_TOPOLOGY.open(encoding="utf-8") as fh:
        return yaml.safe_load(fh)


@pytest.fixture(scope="module")
def default_mesh() -> mesh_gen.CubeMesh:
    return mesh_gen.generate_mesh(load_spec(DEFAULT_TOPOLOGY).geometry)


@pytest.fixture
def cache_home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "xdg_cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    return home


@pytest.fixture
def topo_dir(tmp_path) -> Path:
    d = tmp_path / "topologies"
    d.mkdir()
    return d


def _write(path: Path, doc: dict) -> Path:
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def _ensure(path: Path) -> mesh_gen.MeshResult:
    spec = load_spec(path)
    return mesh_gen.ensure_mesh(spec.geometry, spec.source)


# --- the reference layout ---------------------------------------------------------------

def test_default_grid_is_6x6_with_2x2_hbm_hole(default_mesh):
    m = default_mesh
    assert (m.n_rows, m.n_cols) == (6, 6)
    assert m.hbm_rows == (2, 3) and m.hbm_cols == (2, 3)
    hole = {(r, c) for r in (2, 3) for c in (2, 3)}
    routers = m.routers()
    assert len(routers) == 36 - 4
    assert set(routers) == {(r, c) for r in range(6) for c in range(6)} - hole
    assert routers == sorted(routers)  # row-major
    for r, c in hole:
        assert not m.has_router(r, c)
    for r, c in ((-1, 0), (0, -1), (6, 0), (0, 6)):
        assert not m.has_router(r, c)


def test_default_grid_coordinates(default_mesh):
    m = default_mesh
    assert m.cube_mm == (17.0, 14.0)
    assert m.rows_per_half == 2
    # PE columns at 1.5 mm from each edge, 3 mm pitch; two relay columns in between
    assert m.cols_mm[:2] == (1.5, 4.5) and m.cols_mm[-2:] == (12.5, 15.5)
    assert m.cols_mm[2] == pytest.approx(4.5 + 8 / 3, abs=1e-6)
    assert m.cols_mm[3] == pytest.approx(4.5 + 16 / 3, abs=1e-6)
    # HBM rows at h/2 -/+ 1.5, PE rows symmetric about the centre
    assert m.rows_mm == (1.5, 4.0, 5.5, 8.5, 10.0, 12.5)
    for y, y_mirror in zip(m.rows_mm, reversed(m.rows_mm), strict=True):
        assert y + y_mirror == pytest.approx(14.0)
    assert m.router_pos(4, 0) == (1.5, 10.0)


def test_default_pe_attachments(default_mesh):
    m = default_mesh
    assert [p.pe for p in m.pes] == list(range(8))
    assert [p.router for p in m.pes] == [(0, 0), (0, 1), (1, 4), (1, 5),
                                         (4, 0), (4, 1), (5, 4), (5, 5)]
    assert [p.corner for p in m.pes] == ["nw", "nw", "ne", "ne", "sw", "sw", "se", "se"]
    for p in m.pes:
        assert m.has_router(*p.router)
        # the PE sits exactly on its router
        assert p.pos_mm == m.router_pos(*p.router)
    # top PEs anchor on the HBM box's north edge, bottom ones on its south edge
    box = m.hbm_box_mm
    assert box == (5.0, 4.5, 12.0, 9.5)
    assert [p.hbm_anchor_mm[1] for p in m.pes] == [4.5] * 4 + [9.5] * 4
    xs = [p.hbm_anchor_mm[0] for p in m.pes[:4]]
    assert xs == pytest.approx([5.0 + (k + 0.5) * 7.0 / 4 for k in range(4)])


def test_default_block_attachments(default_mesh):
    m = default_mesh
    assert m.m_cpu.name == "m_cpu" and m.m_cpu.router == (1, 2)
    assert m.m_cpu.pos_mm == (7.0, 3.5)
    assert m.sram.name == "sram" and m.sram.router == (4, 0)
    assert m.sram.pos_mm == (1.5, 9.5)


def test_default_ucie_phys(default_mesh):
    m = default_mesh
    assert [d for d, _ in m.ucie] == ["n", "s", "e", "w"]
    for direction in "nsew":
        phys = m.ucie_phys(direction)
        assert [a.name for a in phys] == ["c0", "c1", "c2", "c3"]
        for a in phys:
            assert m.has_router(*a.router)
    assert [a.router for a in m.ucie_phys("n")] == [(0, 0), (0, 1), (0, 4), (0, 5)]
    assert [a.router for a in m.ucie_phys("s")] == [(5, 0), (5, 1), (5, 4), (5, 5)]
    assert [a.router for a in m.ucie_phys("e")] == [(0, 5), (1, 5), (4, 5), (5, 5)]
    assert [a.router for a in m.ucie_phys("w")] == [(0, 0), (1, 0), (4, 0), (5, 0)]
    # PHYs sit on the cube edge they face
    assert all(a.pos_mm[1] == 0.0 for a in m.ucie_phys("n"))
    assert all(a.pos_mm[1] == 14.0 for a in m.ucie_phys("s"))
    assert all(a.pos_mm[0] == 17.0 for a in m.ucie_phys("e"))
    assert all(a.pos_mm[0] == 0.0 for a in m.ucie_phys("w"))


def test_generate_mesh_is_deterministic_and_round_trips(default_mesh):
    geo = load_spec(DEFAULT_TOPOLOGY).geometry
    a, b = mesh_gen.generate_mesh(geo), mesh_gen.generate_mesh(geo)
    assert a == b == default_mesh
    assert a.source_hash == mesh_gen.source_hash(geo)
    d = mesh_gen.mesh_to_dict(a)
    assert d["generator"] == f"kernbench.topology.mesh_gen v{mesh_gen.MESH_ALGO_VERSION}"
    assert set(d["ucie"]) == {"n", "s", "e", "w"}
    assert mesh_gen.mesh_from_dict(d) == a
    # and through YAML text, as the cache file stores it
    assert mesh_gen.mesh_from_dict(yaml.safe_load(yaml.safe_dump(d))) == a


@pytest.mark.parametrize(("field", "value", "n_rows"), [
    ("n_connections", 1, 4), ("n_connections", 6, 8), ("pe_per_corner", 1, 6),
])
def test_generated_variants_are_self_consistent(field, value, n_rows):
    geo = dataclasses.replace(load_spec(DEFAULT_TOPOLOGY).geometry, **{field: value})
    m = mesh_gen.generate_mesh(geo)
    assert m.n_rows == n_rows
    assert len(m.pes) == 4 * geo.pe_per_corner
    assert len(m.routers()) == m.n_rows * m.n_cols - 4
    for direction in "nsew":
        assert len(m.ucie_phys(direction)) == geo.n_connections
        assert all(m.has_router(*a.router) for a in m.ucie_phys(direction))
    assert all(m.has_router(*p.router) for p in m.pes)
    assert m.has_router(*m.m_cpu.router) and m.has_router(*m.sram.router)
    assert mesh_gen.mesh_from_dict(mesh_gen.mesh_to_dict(m)) == m


# --- cache behaviour ---------------------------------------------------------------------

def test_cache_written_next_to_topology_then_hit(topo_dir, cache_home, default_doc):
    topo = _write(topo_dir / "mine.yaml", default_doc)
    local = topo_dir / "mine.cube_mesh.yaml"
    assert not local.exists()

    first = _ensure(topo)
    assert first.regenerated is True
    assert first.path == local.resolve()
    assert local.is_file()
    cached = yaml.safe_load(local.read_text(encoding="utf-8"))
    assert cached["source_hash"] == first.mesh.source_hash
    assert local.read_text(encoding="utf-8").startswith("# Generated by kernbench from mine.yaml")
    assert not cache_home.exists()  # the user cache was not needed

    mtime = local.stat().st_mtime_ns
    second = _ensure(topo)
    assert second.regenerated is False
    assert second.path == local.resolve()
    assert second.mesh == first.mesh
    assert local.stat().st_mtime_ns == mtime


HASHED_EDITS = [
    pytest.param(("cube", "geometry", "cube_mm", "w"), 18.0, id="cube_mm.w"),
    pytest.param(("cube", "pe_layout", "pe_per_corner"), 1, id="pe_layout.pe_per_corner"),
    pytest.param(("cube", "ucie", "n_connections"), 2, id="ucie.n_connections"),
    pytest.param(("cube", "placement", "m_cpu", "pos_mm"), [8.0, 3.0], id="placement.m_cpu.pos_mm"),
]

UNHASHED_EDITS = [
    pytest.param(("cube", "noc", "link_bw_gbs"), 64.0, id="cube.noc.link_bw_gbs"),
    pytest.param(("pe", "clock_ghz"), 2.0, id="pe.clock_ghz"),
]


def _edit(doc: dict, keys: tuple[str, ...], value) -> dict:
    out = copy.deepcopy(doc)
    d = out
    for k in keys[:-1]:
        d = d[k]
    assert d[keys[-1]] != value
    d[keys[-1]] = value
    return out


@pytest.mark.parametrize(("keys", "value"), HASHED_EDITS)
def test_hashed_field_edit_regenerates(topo_dir, cache_home, default_doc, keys, value):
    topo = _write(topo_dir / "t.yaml", default_doc)
    before = _ensure(topo)
    assert _ensure(topo).regenerated is False

    _write(topo, _edit(default_doc, keys, value))
    after = _ensure(topo)
    assert after.regenerated is True
    assert after.mesh.source_hash != before.mesh.source_hash
    assert after.mesh != before.mesh
    on_disk = yaml.safe_load((topo_dir / "t.cube_mesh.yaml").read_text(encoding="utf-8"))
    assert on_disk["source_hash"] == after.mesh.source_hash
    assert _ensure(topo).regenerated is False


@pytest.mark.parametrize(("keys", "value"), UNHASHED_EDITS)
def test_unhashed_field_edit_reuses_cache(topo_dir, cache_home, default_doc, keys, value):
    topo = _write(topo_dir / "t.yaml", default_doc)
    before = _ensure(topo)
    assert before.regenerated is True

    _write(topo, _edit(default_doc, keys, value))
    spec = load_spec(topo)
    assert spec.content_hash() != load_spec(DEFAULT_TOPOLOGY).content_hash()
    after = mesh_gen.ensure_mesh(spec.geometry, spec.source)
    assert after.regenerated is False
    assert after.mesh == before.mesh
    assert after.path == before.path


def test_unwritable_topology_folder_falls_back_to_user_cache(topo_dir, cache_home, default_doc):
    topo = _write(topo_dir / "ro.yaml", default_doc)
    blocker = topo_dir / "ro.cube_mesh.yaml"
    blocker.mkdir()  # the local cache path is taken by a directory: writing there fails

    spec = load_spec(topo)
    want = mesh_gen.source_hash(spec.geometry)
    shared = cache_home / "kernbench" / "meshes" / f"{want}.cube_mesh.yaml"

    first = mesh_gen.ensure_mesh(spec.geometry, spec.source)
    assert first.regenerated is True
    assert first.path == shared
    assert shared.is_file()
    assert blocker.is_dir() and not any(blocker.iterdir())
    assert yaml.safe_load(shared.read_text(encoding="utf-8"))["source_hash"] == want

    second = mesh_gen.ensure_mesh(spec.geometry, spec.source)
    assert second.regenerated is False
    assert second.path == shared
    assert second.mesh == first.mesh


def test_failed_local_write_leaves_no_temp_file(topo_dir, cache_home, default_doc):
    topo = _write(topo_dir / "ro.yaml", default_doc)
    (topo_dir / "ro.cube_mesh.yaml").mkdir()
    _ensure(topo)
    assert sorted(p.name for p in topo_dir.iterdir()) == ["ro.cube_mesh.yaml", "ro.yaml"]


@pytest.mark.parametrize("garbage", [
    pytest.param("source_hash: [unclosed\n  : : :\n", id="yaml_syntax"),
    pytest.param("\x00\x01 not yaml at all", id="binary_junk"),
    pytest.param("- just\n- a list\n", id="wrong_shape"),
    pytest.param(None, id="right_hash_missing_fields"),
])
def test_corrupted_cache_is_regenerated(topo_dir, cache_home, default_doc, garbage):
    topo = _write(topo_dir / "c.yaml", default_doc)
    good = _ensure(topo)
    local = topo_dir / "c.cube_mesh.yaml"
    if garbage is None:
        garbage = f"source_hash: {good.mesh.source_hash}\ncube_mm: [17.0, 14.0]\n"
    local.write_text(garbage, encoding="utf-8")

    again = _ensure(topo)
    assert again.regenerated is True
    assert again.path == local.resolve()
    assert again.mesh == good.mesh
    repaired = yaml.safe_load(local.read_text(encoding="utf-8"))
    assert mesh_gen.mesh_from_dict(repaired) == good.mesh
    assert _ensure(topo).regenerated is False


def test_stale_hash_in_cache_is_regenerated(topo_dir, cache_home, default_doc):
    topo = _write(topo_dir / "s.yaml", default_doc)
    good = _ensure(topo)
    local = topo_dir / "s.cube_mesh.yaml"
    d = yaml.safe_load(local.read_text(encoding="utf-8"))
    d["source_hash"] = "0" * 16
    d["rows_mm"] = [0.0] * 6  # tampered content must not be served
    local.write_text(yaml.safe_dump(d), encoding="utf-8")
    again = _ensure(topo)
    assert again.regenerated is True
    assert again.mesh == good.mesh
