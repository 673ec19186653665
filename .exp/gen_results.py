import json, os, sys, subprocess
M = sys.argv[1] if len(sys.argv) > 1 else '/tmp/m4'
names = {'med': 'MED', 'cisi': 'CISI', 'nfcorpus': 'NFCorpus'}
f4 = lambda x: '%.4f' % x
f3 = lambda x: '%.3f' % x
pf = lambda xs: ' / '.join('%.3f' % x for x in xs)
def load(n):
    p = f'{M}/{n}.json'
    return json.load(open(p)) if os.path.exists(p) and os.path.getsize(p) > 0 else None
def wall(n):
    e, j = f'{M}/{n}.err', f'{M}/{n}.json'
    b = int(subprocess.check_output(['stat', '-c', '%W', e]).decode())
    return int(os.path.getmtime(j) - b) if b > 0 else None
out = []
P = out.append
P('| dataset | BM25 F1 | BM25 + RM3 F1 | model (no keywords) F1 | after SFT | **final** | final − SFT | folds above BM25 | served nDCG@10 (ranker per fold) | BM25 nDCG@10 | RM3 nDCG@10 | model nDCG@10 | served MAP | BM25 MAP | wall time |')
P('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
for d in names:
    j = load(f'plain-{d}')
    if j is None: continue
    b = j['baselines']; fi = j['final']; sft = [r for r in j['rounds'] if r['step'] == 'sft'][0]
    w = wall(f'plain-{d}')
    P(f"| {names[d]} | {f4(b['bm25']['f1'])} | {f4(b['rm3']['f1'])} | {f4(b['model']['f1'])} | {f4(sft['f1'])} | **{f4(fi['f1'])}** | {fi['f1']-sft['f1']:+.4f} | {j['foldsAboveBaseline']}/{j['folds']} | **{f4(fi['ndcg10'])}** ({', '.join(fi['rank'])}) | {f4(b['bm25']['ndcg10'])} | {f4(b['rm3']['ndcg10'])} | {f4(b['model']['ndcg10'])} | {f4(fi['map'])} | {f4(b['bm25']['map'])} | {w} s |")
P('')
for d in names:
    j = load(f'plain-{d}')
    if j is None: continue
    b = j['baselines']; fi = j['final']
    P(f"#### {names[d]}: final {f4(fi['f1'])} vs BM25 {f4(b['bm25']['f1'])} (RM3 {f4(b['rm3']['f1'])}), above BM25 on {j['foldsAboveBaseline']}/{j['folds']} folds; served nDCG@10 {f4(fi['ndcg10'])} vs BM25 {f4(b['bm25']['ndcg10'])}")
    P('')
    P('| step | held-out F1 | P | R | dev F1 | adopted (folds) | matched/q | keywords/q | served nDCG@10 | keyword-bag nDCG@10 |')
    P('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
    for r in j['rounds']:
        ad = r['adopted']; ad = f"{ad}/{j['folds']}" if isinstance(ad, int) and not isinstance(ad, bool) else ('5/5' if ad is True else ad)
        P(f"| {r['step']} | {f4(r['f1'])} | {f3(r['precision'])} | {f3(r['recall'])} | {f4(r['dev_f1'])} | {ad} | {r['meanMatched']:.1f} | {r['meanKeywords']:.1f} | {f4(r['ndcg10'])} | {f4(r['ndcg10_keywords'])} |")
    P(f"| **final** (best dev step per fold) | **{f4(fi['f1'])}** | {f3(fi['precision'])} | {f3(fi['recall'])} | {f4(fi['dev_f1'])} | | {fi['meanMatched']:.1f} | {fi['meanKeywords']:.1f} | {f4(fi['ndcg10'])} | {f4(fi['ndcg10_keywords'])} |")
    for k, lab in (('bm25', 'BM25 (Lucene analysis), cut-off tuned on training folds'), ('rm3', 'BM25 + RM3 (Lucene analysis), cut-off tuned on training folds'), ('model', 'relevance model, expected-F1 cut, no keywords')):
        x = b[k]
        P(f"| {lab} | {f4(x['f1'])} | {f3(x['precision'])} | {f3(x['recall'])} | | | {x['meanMatched']:.1f} | | {f4(x['ndcg10'])} | |")
    P('')
    P('| fold | held-out / dev queries | final step | ranker | final F1 | BM25 F1 (cut-off) | RM3 F1 | model F1 | served nDCG@10 | BM25 nDCG@10 |')
    P('|---:|---:|---|---|---:|---:|---:|---:|---:|---:|')
    for f in j['perFold']:
        bb = f['baselines']
        P(f"| {f['fold']} | {f['evalQueries']} / {f['devQueries']} | {f['final']['step']} | {f['final']['rank']} | {f4(f['final']['f1'])} | {f4(bb['bm25']['f1'])} ({bb['bm25']['cutoff']}) | {f4(bb['rm3']['f1'])} | {f4(bb['model']['f1'])} | {f4(f['final']['ndcg10'])} | {f4(bb['bm25']['ndcg10'])} |")
    P('')
open(f'{M}/plain-section.md', 'w').write('\n'.join(out) + '\n')
# dense
out = []
P = out.append
P('| dataset | nDCG@10 | MAP | F1 (tuned cut-off) | P | R | cut-off per fold | nDCG@10 per fold | F1 per fold |')
P('|---|---:|---:|---:|---:|---:|---|---|---|')
for d in names:
    r = load(f'densebase-{d}')
    if r is None: continue
    P(f"| {names[d]} | {f4(r['ndcg10'])} | {f4(r['map'])} | {f4(r['f1'])} | {f4(r['precision'])} | {f4(r['recall'])} | {', '.join(map(str, r['cutoffs']))} | {pf([f['ndcg10'] for f in r['perFold']])} | {pf([f['f1'] for f in r['perFold']])} |")
P('')
P('| dataset | final F1 without → **with** embeddings | F1 per fold (with) | SFT F1 with | final − SFT with | served nDCG@10 without → **with** | nDCG@10 per fold (with) | ranker per fold (with) | served MAP without → with | keyword-bag nDCG@10 with | model (no keywords) F1 / nDCG@10 with | folds above BM25 (with) | wall time |')
P('|---|---:|---|---:|---:|---:|---|---|---:|---:|---:|---:|---:|')
for d in names:
    a, b = load(f'plain-{d}'), load(f'dense-{d}')
    if a is None or b is None: continue
    fa, fb = a['final'], b['final']
    sft = [x for x in b['rounds'] if x['step'] == 'sft'][0]['f1']
    m = b['baselines']['model']
    P(f"| {names[d]} | {f4(fa['f1'])} → **{f4(fb['f1'])}** | {pf([x['final']['f1'] for x in b['perFold']])} | {f4(sft)} | {fb['f1']-sft:+.4f} | {f4(fa['ndcg10'])} → **{f4(fb['ndcg10'])}** | {pf([x['final']['ndcg10'] for x in b['perFold']])} | {', '.join(fb['rank'])} | {f4(fa['map'])} → {f4(fb['map'])} | {f4(fb['ndcg10_keywords'])} | {f4(m['f1'])} / {f4(m['ndcg10'])} | {b['foldsAboveBaseline']}/{b['folds']} | {wall(f'dense-{d}')} s |")
open(f'{M}/dense-section.md', 'w').write('\n'.join(out) + '\n')
print(open(f'{M}/plain-section.md').read()[:3000]); print(open(f'{M}/dense-section.md').read())
