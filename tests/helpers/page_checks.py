"""Layout and accessibility checks run inside a loaded page (headless Chromium through Playwright), each returning
what it found wrong so that a test can print it: the page's width, table captions, text alternatives of pictures,
text sizes and text contrast (WCAG 2 relative luminance, the background found by walking up to an opaque one).

Pure page JavaScript over computed styles: what the reader's browser draws, not what the stylesheet says.
"""

from __future__ import annotations

from typing import Any

MIN_FONT_PX = 10.0
MIN_CONTRAST = 4.5

# Elements with their own visible text: a non-blank text node child, shown (has a box, not visibility:hidden).
_TEXT_ELEMENTS = """
() => {
  const shown = (el) => {
    if (!el.getClientRects().length) return false;
    const style = getComputedStyle(el);
    return style.visibility !== "hidden" && style.display !== "none" && Number(style.opacity) > 0;
  };
  const out = [];
  for (const el of document.body.querySelectorAll("*")) {
    if (["SCRIPT", "STYLE", "TITLE", "DESC", "OPTION"].includes(el.tagName.toUpperCase())) continue;
    if (el.closest("[aria-hidden=true] title, svg title, svg desc")) continue;
    const own = Array.from(el.childNodes).some(n => n.nodeType === 3 && n.textContent.trim());
    if (own && shown(el)) out.push(el);
  }
  return out;
}
"""

_FONT_SIZES = """
(min) => {
  const found = [];
  for (const el of (%s)()) {
    let size = parseFloat(getComputedStyle(el).fontSize);
    if (el instanceof SVGElement) {  // SVG text is drawn at its font size times the scale of its coordinates
      const m = el.getScreenCTM();
      if (m) size *= Math.sqrt(Math.abs(m.a * m.d - m.b * m.c));
    }
    if (size < min - 0.01) found.push(`${el.tagName} ${size.toFixed(2)}px: ${el.textContent.trim().slice(0, 40)}`);
  }
  return found;
}
""" % _TEXT_ELEMENTS

_CONTRAST = """
(min) => {
  const parse = (text) => {
    const m = text.match(/rgba?\\(([^)]+)\\)/);
    if (!m) return null;
    const p = m[1].split(/[ ,\\/]+/).filter(Boolean).map(Number);
    return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1};
  };
  const over = (top, under) => ({  // top composited over an opaque colour
    r: top.r * top.a + under.r * (1 - top.a), g: top.g * top.a + under.g * (1 - top.a),
    b: top.b * top.a + under.b * (1 - top.a), a: 1});
  const background = (el) => {
    const layers = [];
    for (let node = el; node && node.nodeType === 1; node = node.parentElement) {
      const c = parse(getComputedStyle(node).backgroundColor);
      if (c && c.a > 0) { layers.push(c); if (c.a >= 1) break; }
    }
    let colour = {r: 255, g: 255, b: 255, a: 1};  // the canvas under everything
    if (layers.length && layers[layers.length - 1].a >= 1) colour = layers.pop();
    for (let i = layers.length - 1; i >= 0; i--) colour = over(layers[i], colour);
    return colour;
  };
  const luminance = (c) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b);
  };
  const found = [];
  for (const el of (%s)()) {
    const style = getComputedStyle(el);
    const bg = background(el);
    let ink = parse(el instanceof SVGElement ? style.fill : style.color);
    if (!ink) continue;
    ink = over(ink, bg);
    const [hi, lo] = [luminance(ink), luminance(bg)].sort((x, y) => y - x);
    const ratio = (hi + 0.05) / (lo + 0.05);
    const what = `${el.tagName}.${el.className.baseVal ?? el.className} ${ratio.toFixed(2)}:1`;
    const colours = `${style.color} on rgb(${bg.r}, ${bg.g}, ${bg.b})`;
    if (ratio < min) found.push(`${what} (${colours}): ${el.textContent.trim().slice(0, 40)}`);
  }
  return found;
}
""" % _TEXT_ELEMENTS

_UNCAPTIONED = """
() => Array.from(document.querySelectorAll("table"))
  .filter(t => !(t.caption && t.caption.textContent.trim()))
  .map(t => t.id || t.className || "a table")
"""

# A picture needs words: role="img" with an aria-label (or aria-labelledby), or a <title>; decorative ones (the
# same facts are in the text beside them) say so with aria-hidden="true".
_UNLABELLED = """
() => Array.from(document.querySelectorAll("svg, img, canvas"))
  .filter(el => !el.parentElement.closest("svg"))
  .filter(el => {
    if (el.closest("[aria-hidden=true]")) return false;
    if (el.tagName.toLowerCase() === "img") return !(el.getAttribute("alt") || "").trim();
    const named = (el.getAttribute("aria-label") || "").trim() || (el.getAttribute("aria-labelledby") || "").trim()
                  || (el.querySelector(":scope > title") || {textContent: ""}).textContent.trim();
    return !(named && el.getAttribute("role") === "img");
  })
  .map(el => el.outerHTML.slice(0, 120))
"""

# Scroll boxes take the keyboard's focus and say what they hold.
_UNNAMED_REGIONS = """
() => Array.from(document.querySelectorAll(".scroll"))
  .filter(el => !(el.getAttribute("role") === "region" && (el.getAttribute("aria-label") || "").trim()
                  && el.getAttribute("tabindex") === "0"))
  .map(el => el.outerHTML.slice(0, 120))
"""


def page_width(page: Any) -> dict[str, int]:
    """The layout width of the page and the viewport's width; the page scrolls sideways when the first is larger."""
    return page.evaluate("() => ({scroll: document.documentElement.scrollWidth, viewport: window.innerWidth})")


def widest(page: Any, limit: int = 5) -> list[str]:
    """The elements that stick out past the viewport's right edge (what to fix when the page is too wide)."""
    return page.evaluate("""(limit) => Array.from(document.body.querySelectorAll("*"))
      .filter(el => el.getBoundingClientRect().right > window.innerWidth + 0.5
                    && !el.parentElement.closest(".scroll, pre"))
      .slice(0, limit).map(el => `${el.tagName}#${el.id}.${el.className.baseVal ?? el.className} ` +
                           `right=${Math.round(el.getBoundingClientRect().right)}`)""", limit)


def small_text(page: Any) -> list[str]:
    return page.evaluate(_FONT_SIZES, MIN_FONT_PX)


def low_contrast(page: Any) -> list[str]:
    return page.evaluate(_CONTRAST, MIN_CONTRAST)


def uncaptioned_tables(page: Any) -> list[str]:
    return page.evaluate(_UNCAPTIONED)


def unlabelled_pictures(page: Any) -> list[str]:
    return page.evaluate(_UNLABELLED)


def unnamed_scroll_boxes(page: Any) -> list[str]:
    return page.evaluate(_UNNAMED_REGIONS)


def open_all_details(page: Any) -> None:
    """Open every <details>, so the checks see what a reader sees after unfolding everything."""
    page.evaluate("() => document.querySelectorAll('details').forEach(d => { d.open = true; })")


def problems(page: Any) -> dict[str, list[str]]:
    """Every check's findings (empty lists when the page passes)."""
    width = page_width(page)
    too_wide = [f"{width['scroll']} px wide in a {width['viewport']} px viewport", *widest(page)]
    return {"page wider than the viewport": too_wide if width["scroll"] > width["viewport"] else [],
            "tables without a caption": uncaptioned_tables(page),
            "pictures without a text alternative": unlabelled_pictures(page),
            "scroll boxes without a name or focus": unnamed_scroll_boxes(page),
            "text under 10 px": small_text(page),
            "text under 4.5:1 contrast": low_contrast(page)}
