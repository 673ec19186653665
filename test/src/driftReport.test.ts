/**
 * The drift report's markup without a browser: escaping, every chart present, no script or
 * external resource, ticks and circle packing. The rendering in headless Chromium is
 * driftReport.real.test.ts (the real tier).
 */
import { describe, expect, it } from 'vitest';
import { analyzeDrift } from '../../src/drift/analyze.ts';
import { logTicks, niceTicks, packCircles, renderDriftHtml } from '../../src/drift/report.ts';
import { syntheticDriftInput } from '../../src/drift/synthetic.ts';

const CHARTS = ['bubbles', 'ngram', 'vocab', 'alignment', 'f1', 'churn'] as const;

describe('report markup without a browser', () => {
  it('is self-contained: no script, no external resource', () => {
    const html = renderDriftHtml(analyzeDrift(syntheticDriftInput({ seed: 20260609, items: 300, queries: 90, generations: 6 })));
    expect(html).not.toMatch(/<script|<link|<img|@import|url\(/i);
    const urls = html.match(/https?:\/\/[^\s"')]+/g) ?? [];
    expect(urls.every((u) => u === 'http://www.w3.org/2000/svg')).toBe(true);
  });

  it('escapes keywords and titles, and draws every chart even with little data', () => {
    const r = analyzeDrift({
      sides: {
        item: [
          { generation: 0, entries: [{ id: 'a', self: 't', keywords: ['old <b>'] }] },
          { generation: 1, entries: [{ id: 'a', self: 't', keywords: ['r&d <x>', '<script>alert(1)</script>'] }] },
        ],
        query: [],
      },
    });
    const html = renderDriftHtml(r, { title: 'T <i>' });
    expect(html).not.toMatch(/<script|<b>|<i>/);
    expect(html).toContain('r&amp;d x');
    expect(html).toContain('script&gt;alert(1)&lt;/script');
    expect(html).toContain('T &lt;i&gt;');
    for (const c of CHARTS) expect(html).toContain(`data-chart="${c}"`);
    expect(html).toContain('no data in this range'); // f1, alignment and churn are empty here
  });

  it('ticks cover the data', () => {
    expect(niceTicks(0, 1)).toEqual([0, 0.2, 0.4, 0.6, 0.8, 1]);
    const t = niceTicks(0, 0.43);
    expect(t[0]).toBe(0);
    expect(t[t.length - 1]).toBeGreaterThanOrEqual(0.43);
    expect(logTicks(400, 1300)).toEqual([100, 200, 500, 1000, 2000, 5000, 10000]);
    expect(logTicks(3, 45000)).toEqual([1, 10, 100, 1000, 10000, 100000]);
  });

  it('packs circles inside the box without overlap', () => {
    const radii = Array.from({ length: 60 }, (_, i) => 4 + ((i * 37) % 23));
    const pos = packCircles(radii, 560, 270);
    const placed = pos.flatMap((p, i) => (p ? [{ ...p, r: radii[i] }] : []));
    expect(placed.length).toBeGreaterThan(30);
    for (const p of placed) {
      expect(p.x - p.r).toBeGreaterThanOrEqual(0);
      expect(p.x + p.r).toBeLessThanOrEqual(560);
      expect(p.y - p.r).toBeGreaterThanOrEqual(0);
      expect(p.y + p.r).toBeLessThanOrEqual(270);
    }
    for (let i = 0; i < placed.length; i++)
      for (let j = i + 1; j < placed.length; j++) {
        const d = Math.hypot(placed[i].x - placed[j].x, placed[i].y - placed[j].y);
        expect(d).toBeGreaterThanOrEqual(placed[i].r + placed[j].r);
      }
  });
});
