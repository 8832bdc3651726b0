"""A check the plot tests share: what a matplotlib figure draws outside where it can be seen."""

from __future__ import annotations

from typing import Any


def artists_outside_axes(fig: Any, tolerance_px: float = 1.5) -> list[str]:
    """What a figure draws outside where it can be seen: data (lines, bars, meshes, dots) past its
    axes' box, which the axes clip silently, and labels or text past the figure's edge, which the
    saved image cuts. Empty for a figure a reader can trust; each entry names the axes and artist."""
    import numpy as np
    from matplotlib.collections import LineCollection, PathCollection, QuadMesh
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle

    fig.canvas.draw()  # settle the layout first (constrained layout moves the axes)
    renderer = fig.canvas.get_renderer()
    out: list[str] = []

    def check(where: str, points: Any, box: Any) -> None:
        pts = np.asarray(points, dtype=float).reshape(-1, 2)
        pts = pts[np.isfinite(pts).all(axis=1)]
        if not len(pts):
            return
        lo, hi = pts.min(axis=0), pts.max(axis=0)
        if (
            lo[0] < box.x0 - tolerance_px
            or hi[0] > box.x1 + tolerance_px
            or lo[1] < box.y0 - tolerance_px
            or hi[1] > box.y1 + tolerance_px
        ):
            out.append(
                f"{where}: drawn at x {lo[0]:.0f}..{hi[0]:.0f}, y {lo[1]:.0f}..{hi[1]:.0f} px, "
                f"axes box x {box.x0:.0f}..{box.x1:.0f}, y {box.y0:.0f}..{box.y1:.0f} px"
            )

    for i, ax in enumerate(fig.axes):
        if ax.get_label() == "<colorbar>":
            continue
        name = f"axes {i} ({ax.get_title() or ax.get_ylabel() or '-'})"
        box = ax.bbox
        for line in ax.lines:
            if (
                isinstance(line, Line2D)
                and line.get_visible()
                and line.get_transform().contains_branch(ax.transData)
            ):
                check(
                    f"{name}: line {line.get_label()}", line.get_transform().transform(line.get_xydata()), box
                )
        for patch in ax.patches:
            if isinstance(patch, Rectangle) and patch.get_visible():
                ext = patch.get_window_extent(renderer)
                check(f"{name}: bar", [[ext.x0, ext.y0], [ext.x1, ext.y1]], box)
        for coll in ax.collections:
            if not coll.get_visible():
                continue
            if isinstance(coll, QuadMesh):
                check(
                    f"{name}: mesh",
                    coll.get_transform().transform(np.asarray(coll.get_coordinates()).reshape(-1, 2)),
                    box,
                )
            elif isinstance(coll, LineCollection):
                for seg in coll.get_segments():
                    check(f"{name}: error bar", coll.get_transform().transform(seg), box)
            elif isinstance(coll, PathCollection):
                check(f"{name}: dots", coll.get_offset_transform().transform(coll.get_offsets()), box)
    tight = fig.get_tightbbox(renderer)  # inches: every label, tick, title and legend
    page = fig.bbox_inches
    slack = tolerance_px / fig.dpi
    if (
        tight.x0 < page.x0 - slack
        or tight.y0 < page.y0 - slack
        or tight.x1 > page.x1 + slack
        or tight.y1 > page.y1 + slack
    ):
        out.append(f"figure: text or labels reach past the figure's edge ({tight} vs {page})")
    return out
