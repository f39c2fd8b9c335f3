"""Small inline SVG charts (no JavaScript, no external files): lines and bars.

Every text is escaped; every chart has a fixed size and a bounded number of
points (the caller buckets its data), so a report stays small whatever the
crawl's length.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

WIDTH, HEIGHT = 640, 240
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 16, 40
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd")


def _number(value: float) -> str:
    if abs(value) >= 1e6:
        return f"{value / 1e6:.1f}M"
    if abs(value) >= 1e4:
        return f"{value / 1e3:.0f}k"
    if abs(value) >= 100 or value == int(value):
        return f"{value:.0f}"
    return f"{value:.2g}"


def _frame(title: str, y_max: float, x_labels: Sequence[tuple[float, str]]) -> list[str]:
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}">',
        f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>',
        f'<line x1="{LEFT}" y1="{TOP + plot_h}" x2="{LEFT + plot_w}" y2="{TOP + plot_h}" stroke="#444"/>',
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + plot_h}" stroke="#444"/>',
    ]
    for step in range(5):
        value = y_max * step / 4
        y = TOP + plot_h - plot_h * step / 4
        parts.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + plot_w}" y2="{y:.1f}" stroke="#ddd"/>')
        parts.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end" '
                     f'font-family="sans-serif">{_number(value)}</text>')
    for fraction, label in x_labels:
        x = LEFT + plot_w * fraction
        parts.append(f'<text x="{x:.1f}" y="{TOP + plot_h + 16}" font-size="11" text-anchor="middle" '
                     f'font-family="sans-serif">{escape(label)}</text>')
    return parts


def line_chart(title: str, xs: Sequence[float], series: Sequence[tuple[str, Sequence[float]]],
               x_label: str = "minutes") -> str:
    """Lines over a shared x axis (e.g. minutes since the start)."""
    if not xs or not series:
        return empty_chart(title)
    x_min, x_max = min(xs), max(xs)
    span = (x_max - x_min) or 1.0
    y_max = max((max(values) for _, values in series if values), default=0.0) or 1.0
    y_max *= 1.1
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    ticks = [(i / 4, _number(x_min + span * i / 4)) for i in range(5)]
    parts = _frame(title, y_max, ticks)
    for index, (name, values) in enumerate(series):
        color = COLORS[index % len(COLORS)]
        points = " ".join(
            f"{LEFT + plot_w * (x - x_min) / span:.1f},{TOP + plot_h - plot_h * v / y_max:.1f}"
            for x, v in zip(xs, values)
        )
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{points}"/>')
        parts.append(f'<text x="{LEFT + 8}" y="{TOP + 14 + 14 * index}" font-size="12" fill="{color}" '
                     f'font-family="sans-serif">{escape(name)}</text>')
    parts.append(f'<text x="{LEFT + plot_w / 2:.0f}" y="{HEIGHT - 6}" font-size="11" text-anchor="middle" '
                 f'font-family="sans-serif">{escape(x_label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def bar_chart(title: str, bars: Sequence[tuple[str, float]]) -> str:
    """Vertical bars with a label under each."""
    if not bars:
        return empty_chart(title)
    y_max = (max(value for _, value in bars) or 1.0) * 1.1
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_w / len(bars)
    labels = [((i + 0.5) / len(bars), label[:14]) for i, (label, _) in enumerate(bars)]
    parts = _frame(title, y_max, labels)
    for i, (label, value) in enumerate(bars):
        height = plot_h * value / y_max
        x = LEFT + slot * i + slot * 0.15
        parts.append(f'<rect x="{x:.1f}" y="{TOP + plot_h - height:.1f}" width="{slot * 0.7:.1f}" '
                     f'height="{height:.1f}" fill="{COLORS[0]}"><title>{escape(label)}: {_number(value)}'
                     f'</title></rect>')
    parts.append("</svg>")
    return "".join(parts)


def empty_chart(title: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="60" role="img" '
            f'aria-label="{escape(title)}"><text x="10" y="35" font-size="13" font-family="sans-serif">'
            f'No data yet</text></svg>')
