/**
 * Renders the drift report of a seeded synthetic history, opens it in headless Chromium
 * (Debian's `chromium`) and checks that every chart is drawn with data: the marks exist
 * and have a non-zero rendered size (measured in the page), and the screenshot of each
 * chart's region is not blank and shows the chart's own colours.
 *
 * The real tier (npm run test:real): Chromium is required (.ci/run installs Debian's
 * `chromium`); without it the test fails naming the package, and it is skipped only when
 * COGR_SKIP_CHROMIUM=1 is set. The markup checks that need no browser are in
 * driftReport.test.ts (the fast tier).
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { inflateSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { analyzeDrift, type DriftReport } from '../../src/drift/analyze.ts';
import { renderDriftHtml } from '../../src/drift/report.ts';
import { syntheticDriftInput } from '../../src/drift/synthetic.ts';

const CHROMIUM = '/usr/bin/chromium';
const haveChromium = existsSync(CHROMIUM);
const SHOT_HEIGHT = 3400;
const CHARTS = ['bubbles', 'ngram', 'vocab', 'alignment', 'f1', 'churn'] as const;
const skip = process.env.COGR_SKIP_CHROMIUM === '1';
if (skip) process.stderr.write('test/src/driftReport.real.test.ts: skipped because COGR_SKIP_CHROMIUM=1\n');

function chromium(args: string[], userDataDir: string): Promise<string> {
  const flags = [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--hide-scrollbars',
    '--force-device-scale-factor=1',
    `--user-data-dir=${userDataDir}`,
  ];
  return new Promise((resolve, reject) => {
    execFile(CHROMIUM, [...flags, ...args], { timeout: 90_000, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`chromium failed: ${err.message}\n${stderr.slice(-2000)}`));
      else resolve(stdout);
    });
  });
}

// --- A minimal PNG decoder (8-bit RGB/RGBA, non-interlaced), enough for screenshots.
interface Image {
  width: number;
  height: number;
  /** RGBA, row-major. */
  rgba: Uint8Array;
}

function decodePng(buf: Buffer): Image {
  const sig = [137, 80, 78, 71, 13, 10, 26, 10];
  sig.forEach((b, i) => {
    if (buf[i] !== b) throw new Error('not a PNG');
  });
  let off = 8;
  let width = 0;
  let height = 0;
  let colourType = -1;
  const idat: Buffer[] = [];
  while (off < buf.length) {
    const len = buf.readUInt32BE(off);
    const type = buf.toString('latin1', off + 4, off + 8);
    const data = buf.subarray(off + 8, off + 8 + len);
    if (type === 'IHDR') {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      const depth = data[8];
      colourType = data[9];
      if (depth !== 8 || (colourType !== 2 && colourType !== 6) || data[12] !== 0) {
        throw new Error(`unsupported PNG: depth ${depth}, colour type ${colourType}, interlace ${data[12]}`);
      }
    } else if (type === 'IDAT') idat.push(data);
    else if (type === 'IEND') break;
    off += 12 + len;
  }
  const bpp = colourType === 6 ? 4 : 3;
  const raw = inflateSync(Buffer.concat(idat));
  const stride = width * bpp;
  const out = new Uint8Array(width * height * 4);
  let prev = new Uint8Array(stride);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)];
    const line = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    const cur = new Uint8Array(stride);
    for (let i = 0; i < stride; i++) {
      const a = i >= bpp ? cur[i - bpp] : 0;
      const b = prev[i];
      const c = i >= bpp ? prev[i - bpp] : 0;
      let v = line[i];
      if (filter === 1) v += a;
      else if (filter === 2) v += b;
      else if (filter === 3) v += (a + b) >> 1;
      else if (filter === 4) {
        const p = a + b - c;
        const pa = Math.abs(p - a);
        const pb = Math.abs(p - b);
        const pc = Math.abs(p - c);
        v += pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      } else if (filter !== 0) throw new Error(`bad PNG filter ${filter}`);
      cur[i] = v & 0xff;
    }
    for (let x = 0; x < width; x++) {
      const o = (y * width + x) * 4;
      out[o] = cur[x * bpp];
      out[o + 1] = cur[x * bpp + 1];
      out[o + 2] = cur[x * bpp + 2];
      out[o + 3] = bpp === 4 ? cur[x * bpp + 3] : 255;
    }
    prev = cur;
  }
  return { width, height, rgba: out };
}

interface RegionStats {
  pixels: number;
  nonWhite: number;
  colours: number;
  /** Pixels within a Manhattan distance `tol` of the colour. */
  count: (hex: string, tol?: number) => number;
}

function regionStats(img: Image, r: { x: number; y: number; w: number; h: number }): RegionStats {
  const x0 = Math.max(0, Math.floor(r.x));
  const y0 = Math.max(0, Math.floor(r.y));
  const x1 = Math.min(img.width, Math.ceil(r.x + r.w));
  const y1 = Math.min(img.height, Math.ceil(r.y + r.h));
  const colours = new Map<number, number>();
  let nonWhite = 0;
  for (let y = y0; y < y1; y++) {
    for (let x = x0; x < x1; x++) {
      const o = (y * img.width + x) * 4;
      const c = (img.rgba[o] << 16) | (img.rgba[o + 1] << 8) | img.rgba[o + 2];
      colours.set(c, (colours.get(c) ?? 0) + 1);
      if (img.rgba[o] < 245 || img.rgba[o + 1] < 245 || img.rgba[o + 2] < 245) nonWhite++;
    }
  }
  return {
    pixels: (x1 - x0) * (y1 - y0),
    nonWhite,
    colours: colours.size,
    count: (hex, tol = 40) => {
      const t = parseInt(hex.slice(1), 16);
      const [tr, tg, tb] = [(t >> 16) & 255, (t >> 8) & 255, t & 255];
      let n = 0;
      for (const [c, k] of colours) {
        if (Math.abs(((c >> 16) & 255) - tr) + Math.abs(((c >> 8) & 255) - tg) + Math.abs((c & 255) - tb) <= tol) n += k;
      }
      return n;
    },
  };
}

// Measures, inside the page, each chart's box and the rendered size of its marks.
const PROBE = `<script>
(() => {
  const charts = {};
  for (const svg of document.querySelectorAll('svg[data-chart]')) {
    const b = svg.getBoundingClientRect();
    let marks = 0, sized = 0;
    for (const m of svg.querySelectorAll('.mark')) {
      marks++;
      const r = m.getBoundingClientRect();
      const line = m.tagName.toLowerCase() === 'path';
      if (line ? r.width > 0.5 || r.height > 0.5 : r.width > 0.5 && r.height > 0.5) sized++;
    }
    charts[svg.dataset.chart] = {
      x: b.left + window.scrollX, y: b.top + window.scrollY, w: b.width, h: b.height, marks, sized,
      circles: svg.querySelectorAll('circle.mark').length, rects: svg.querySelectorAll('rect.mark').length,
      paths: svg.querySelectorAll('path.mark').length, texts: svg.querySelectorAll('text').length,
    };
  }
  const pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = encodeURIComponent(JSON.stringify({ charts, height: document.documentElement.scrollHeight, width: document.documentElement.scrollWidth }));
  document.body.appendChild(pre);
})();
</script>`;

interface ChartProbe {
  x: number;
  y: number;
  w: number;
  h: number;
  marks: number;
  sized: number;
  circles: number;
  rects: number;
  paths: number;
  texts: number;
}

describe.skipIf(skip)('drift report in headless Chromium', () => {
  let dir: string;
  let report: DriftReport;
  let html: string;
  let probe: { charts: Record<string, ChartProbe>; height: number; width: number };
  let img: Image;

  beforeAll(async () => {
    if (!haveChromium)
      throw new Error(
        `${CHROMIUM} is required by the real tier (apt-get install -y chromium; set COGR_SKIP_CHROMIUM=1 to skip this test on purpose)`,
      );
    dir = mkdtempSync(join(tmpdir(), 'cogr-drift-report-'));
    report = analyzeDrift(syntheticDriftInput({ seed: 20260609, items: 300, queries: 90, generations: 6 }));
    html = renderDriftHtml(report);
    writeFileSync(join(dir, 'report.html'), html);
    writeFileSync(join(dir, 'probe.html'), html.replace('</body>', `${PROBE}</body>`));
    // The two browser runs are independent: measure (dump-dom) and screenshot in parallel.
    // The window is fixed; the test checks that every chart lies inside the shot.
    const png = join(dir, 'report.png');
    const [dom] = await Promise.all([
      chromium(['--dump-dom', pathToFileURL(join(dir, 'probe.html')).href], join(dir, 'profile-dom')),
      chromium(
        [`--screenshot=${png}`, `--window-size=1280,${SHOT_HEIGHT}`, pathToFileURL(join(dir, 'report.html')).href],
        join(dir, 'profile-shot'),
      ),
    ]);
    const m = /<pre id="probe">([^<]*)<\/pre>/.exec(dom);
    if (!m) throw new Error(`the probe did not run; DOM starts with ${dom.slice(0, 300)}`);
    probe = JSON.parse(decodeURIComponent(m[1]));
    img = decodePng(readFileSync(png));
  });

  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('draws every chart with sized marks matching the data', () => {
    for (const name of CHARTS) {
      const c = probe.charts[name];
      expect(c, `chart ${name}`).toBeDefined();
      expect(c.w).toBeGreaterThan(300);
      expect(c.h).toBeGreaterThan(200);
      expect(c.marks, `marks of ${name}`).toBeGreaterThan(0);
      expect(c.sized, `sized marks of ${name}`).toBe(c.marks);
      expect(c.texts, `labels of ${name}`).toBeGreaterThan(5);
    }
    const gens = (s: 'item' | 'query') => report.sides[s].generations;
    // Bubbles: one circle per added/dropped keyword shown (lists are capped at 50 each).
    const listed = (['item', 'query'] as const).reduce(
      (a, s) => a + report.sides[s].diff!.added.length + report.sides[s].diff!.dropped.length,
      0,
    );
    expect(probe.charts.bubbles.circles).toBeGreaterThan(listed * 0.8);
    expect(probe.charts.bubbles.circles).toBeLessThanOrEqual(listed);
    // N-gram bars: one rect per non-zero length share.
    const segments = (['item', 'query'] as const)
      .flatMap((s) => gens(s))
      .reduce((a, g) => a + [g.lengthShares.one, g.lengthShares.two, g.lengthShares.threePlus].filter((x) => x > 0).length, 0);
    expect(probe.charts.ngram.rects).toBe(segments);
    // Lines: one marker per point and one path per series.
    expect(probe.charts.vocab.circles).toBe(gens('item').length + gens('query').length);
    expect(probe.charts.vocab.paths).toBe(2);
    expect(probe.charts.alignment.circles).toBe(3 * report.alignment.length);
    expect(probe.charts.alignment.paths).toBe(3);
    expect(probe.charts.f1.circles).toBe(report.f1.length);
    expect(probe.charts.churn.circles).toBe(gens('item').length - 1 + gens('query').length - 1);
  });

  it('the screenshot is not blank and each chart shows its colours', () => {
    expect(img.width).toBe(1280);
    expect(img.height).toBe(SHOT_HEIGHT);
    const whole = regionStats(img, { x: 0, y: 0, w: img.width, h: img.height });
    expect(whole.colours).toBeGreaterThan(50);
    // Each colour must cover far more pixels than its legend swatch (≤ ~150 px): the
    // bubbles and bars are areas, the lines ~2.5 px wide over most of the plot width.
    // Bubbles are drawn at 0.78 opacity over the cluster box, hence the blended colours.
    const expectColours: Record<(typeof CHARTS)[number], [string, number][]> = {
      bubbles: [
        ['#48b671', 20000],
        ['#e25555', 20000],
      ],
      ngram: [
        ['#bfdbfe', 3000],
        ['#3b82f6', 3000],
        ['#1e3a8a', 3000],
      ],
      vocab: [
        ['#2563eb', 600],
        ['#ea580c', 600],
      ],
      alignment: [
        ['#2563eb', 600],
        ['#ea580c', 600],
        ['#7c3aed', 400],
      ],
      f1: [
        ['#2563eb', 500],
        ['#ea580c', 600],
      ],
      churn: [
        ['#2563eb', 500],
        ['#ea580c', 500],
      ],
    };
    for (const name of CHARTS) {
      const c = probe.charts[name];
      expect(c.y + c.h).toBeLessThanOrEqual(img.height);
      const s = regionStats(img, c);
      expect(s.nonWhite / s.pixels, `ink in ${name}`).toBeGreaterThan(0.01);
      expect(s.colours, `colours in ${name}`).toBeGreaterThan(8);
      for (const [hex, min] of expectColours[name]) expect(s.count(hex), `pixels of ${hex} in ${name}`).toBeGreaterThan(min);
    }
  });
});
