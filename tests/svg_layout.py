"""Text boxes of rendered plotly figures, read from the SVG a browser drew (the browser tests' helper).

`layout_problems(page)` returns one line per problem on the visible plotly charts of a Playwright page: two
texts of a figure whose boxes overlap (title, legend entries, axis titles, tick labels, annotations,
text points; the labels inside bars are left out: plotly hides those that do not fit), a text that
runs past its figure's edge (a clipped tick label), a figure wider than the window, and a title that the
figure and the page around it both show (the same words twice). [] when the charts are clean.
"""
from __future__ import annotations

# Each text is classed by the group it is drawn in (plotly.js's own class names).
LAYOUT_JS = r"""
(tolerance) => {
  const KINDS = [['.gtitle', 'title'], ['.legendtitletext', 'legend'], ['.legendtext', 'legend'],
                 ['.xtitle, .x2title, .x3title', 'x title'], ['.ytitle, .y2title, .y3title', 'y title'],
                 ['.annotation-text', 'annotation'], ['.textpoint text', 'text point']];
  const kindOf = (el) => {
    const tick = el.closest('[class*="tick"]');
    if (tick && /(^|\s)[xy]\d*tick(\s|$)/.test(tick.getAttribute('class') || '')) return 'tick label';
    for (const [selector, kind] of KINDS) if (el.matches(selector) || el.closest(selector)) return kind;
    return null;
  };
  const visible = (el) => {
    for (let e = el; e && e.nodeType === 1; e = e.parentElement) {
      const s = getComputedStyle(e);
      if (s.display === 'none' || s.visibility === 'hidden' || s.opacity === '0') return false;
    }
    return true;
  };
  const overlap = (a, b) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > tolerance &&
                            Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > tolerance;
  const problems = [];
  const plots = [...document.querySelectorAll('.js-plotly-plot')].filter(p => p.getClientRects().length);
  plots.forEach((plot, i) => {
    const frame = plot.querySelector('svg.main-svg').getBoundingClientRect();
    const texts = [];
    for (const el of plot.querySelectorAll('svg text')) {
      if (el.closest('.bartext, .updatemenu-container, .slider-container, .hoverlayer, .infolayer .rangeslider-container')) continue;
      const words = (el.textContent || '').trim();
      const kind = kindOf(el);
      if (!words || !kind || !visible(el)) continue;
      const r = el.getBoundingClientRect();
      if (!r.width || !r.height) continue;
      texts.push({kind, words, r});
    }
    const name = (plot.querySelector('.gtitle') || {}).textContent || `chart ${i + 1}`;
    for (const t of texts) {
      if (t.r.left < frame.left - tolerance || t.r.right > frame.right + tolerance ||
          t.r.top < frame.top - tolerance || t.r.bottom > frame.bottom + tolerance)
        problems.push(`${name}: ${t.kind} "${t.words}" runs past the figure's edge`);
    }
    for (let a = 0; a < texts.length; a++)
      for (let b = a + 1; b < texts.length; b++)
        if (overlap(texts[a].r, texts[b].r))
          problems.push(`${name}: ${texts[a].kind} "${texts[a].words}" overlaps ${texts[b].kind} "${texts[b].words}"`);
    if (frame.right > document.documentElement.clientWidth + tolerance)
      problems.push(`${name}: the figure is wider than the window (${Math.round(frame.right)} px)`);
    const title = plot.querySelector('.gtitle');
    const host = plot.closest('section, [data-testid="stVerticalBlock"]');
    if (title && host) {
      const words = title.textContent.trim();
      const headings = [...host.querySelectorAll('h1, h2, h3')].filter(h => h.textContent.trim() === words);
      if (words && headings.length) problems.push(`${name}: the title is shown twice (the figure's and the page's)`);
    }
  });
  return problems;
}
"""


def layout_problems(page, tolerance_px: float = 1.0) -> list:
    """Problems of the visible plotly charts of a Playwright page (LAYOUT_JS), [] when there are none."""
    return page.evaluate(LAYOUT_JS, tolerance_px)


CUT_TEXT_JS = r"""
(tolerance) => [...document.querySelectorAll('[data-testid="stMetricValue"], .katex-display')]
  .filter(e => e.getClientRects().length && !e.closest('details:not([open])'))
  .filter(e => e.scrollWidth > e.clientWidth + tolerance)
  .map(e => `${(e.innerText || e.textContent || '').replace(/\s+/g, '').slice(0, 50)} (${e.scrollWidth} px in ${e.clientWidth})`)
"""


def cut_texts(page, tolerance_px: float = 3.0) -> list:
    """Metric values and display formulas, outside closed expanders, wider than their box (cut, or scrolled
    sideways). The tolerance is KaTeX's italic overhang: a last italic glyph reaches 2 px past its box."""
    return page.evaluate(CUT_TEXT_JS, tolerance_px)


CLIPPED_JS = r"""
(tolerance) => {
  // Buttons, links (page links and the sidebar's menu included) and widget labels: a text whose laid-out box
  // runs past a box that clips it (an ancestor with overflow other than visible) or an element cut with an
  // ellipsis (scrollWidth > clientWidth).
  const CONTROLS = 'button, a, label, [data-testid="stWidgetLabel"], [data-testid="stPageLink-NavLink"]';
  const clips = (el) => { const s = getComputedStyle(el); return s.overflowX !== 'visible' || s.overflowY !== 'visible'; };
  const shown = (el) => { const r = el.getBoundingClientRect();     // visually hidden (1 px) helpers left out
    return r.width > 2 && r.height > 2 && !el.closest('details:not([open]), [aria-hidden="true"]'); };
  const problems = new Set();
  // A select box's value (Streamlit's selectbox is a combo box around an <input>: its text cannot wrap, and one
  // longer than the box is cut at the box's edge, e.g. "delaye" for "delayed" at 1280x720 in classroom mode).
  for (const input of document.querySelectorAll('input[role="combobox"]')) {
    if (!shown(input) || !input.value) continue;
    if (input.scrollWidth > input.clientWidth + tolerance)
      problems.add(`select value "${input.value.slice(0, 60)}": cut (${input.scrollWidth} px of text in ${input.clientWidth})`);
  }
  for (const control of document.querySelectorAll(CONTROLS)) {
    if (!shown(control)) continue;
    const name = (control.innerText || control.textContent || '').replace(/\s+/g, ' ').trim().slice(0, 60);
    if (!name) continue;
    for (const el of [control, ...control.querySelectorAll('*')]) {
      if (!shown(el)) continue;
      if (el.scrollWidth > el.clientWidth + tolerance && clips(el) && el.clientWidth > 0)
        problems.add(`"${name}": cut (${el.scrollWidth} px of text in ${el.clientWidth})`);
    }
    const walker = document.createTreeWalker(control, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (!node.textContent.trim()) continue;
      const range = document.createRange();
      range.selectNodeContents(node);
      const r = range.getBoundingClientRect();
      if (!r.width) continue;
      // sideways past any clipping box (the sidebar's edge included); up or down only within the control (a
      // page scrolled past its text is no cut)
      let inside = true;
      for (let up = node.parentElement; up && up !== document.body; up = up.parentElement) {
        const box = up.getBoundingClientRect();
        const past = r.right > box.right + tolerance || r.left < box.left - tolerance ||
          (inside && (r.bottom > box.bottom + tolerance || r.top < box.top - tolerance));
        if (up === control) inside = false;
        if (clips(up) && past) {
          problems.add(`"${name}": "${node.textContent.trim().slice(0, 40)}" runs past its box`);
          break;
        }
      }
    }
  }
  return [...problems];
}
"""


def clipped_controls(page, tolerance_px: float = 2.0) -> list:
    """Buttons, links, labels and select boxes' values whose text is cut by their box (an ellipsis, text past a
    clipping box, a value wider than its input)."""
    return page.evaluate(CLIPPED_JS, tolerance_px)


GANTT_ROWS_JS = r"""
() => [...document.querySelectorAll('.js-plotly-plot')].filter(p => p.getClientRects().length).map(plot => {
  const area = plot.querySelector('.draglayer .nsewdrag');
  const ticks = [...plot.querySelectorAll('.yaxislayer-above .ytick text, .yaxislayer-above text')]
    .filter(t => /^(stage|device|rank) /.test((t.textContent || '').trim()));
  return {title: ((plot.querySelector('.gtitle') || {}).textContent || '').trim(),
          rows: ticks.length, plot_px: area ? area.getBoundingClientRect().height : 0};
}).filter(g => g.rows > 0)
"""


def gantt_rows(page) -> list:
    """The visible Gantts: their title, how many row labels (stage k, device k) are drawn and the plot area's
    height in pixels (plotly leaves out the tick labels of rows too thin for them)."""
    return page.evaluate(GANTT_ROWS_JS)
