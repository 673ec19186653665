import { describe, expect, it } from 'vitest';
import { parseKeywordOutput, stripReasoning } from '../../generators/parse.ts';

describe('tolerant keyword parser: prose is not a keyword list', () => {
  it('rejects a short refusal with a comma and a full stop', () => {
    expect(parseKeywordOutput('I cannot help with that request, sorry.').ok).toBe(false);
    expect(parseKeywordOutput('Sure! Here is what I think about the query.').ok).toBe(false);
  });
  it('still accepts short keyword lists that end with a full stop', () => {
    expect(parseKeywordOutput('breast cancer, tamoxifen, hormone therapy.')).toMatchObject({
      ok: true,
      keywords: ['breast cancer', 'tamoxifen', 'hormone therapy'],
    });
    expect(parseKeywordOutput('statins\nbreast cancer survival')).toMatchObject({
      ok: true,
      keywords: ['statins', 'breast cancer survival'],
    });
  });
});

describe('reasoning blocks are stripped before parsing', () => {
  it('drops <think>…</think> blocks, so the reasoning never becomes keywords', () => {
    const out =
      '<think>\nOkay, the user wants keywords. I think statins matter here.\n</think>\n\n{"keywords": ["statins", "breast cancer"]}';
    expect(parseKeywordOutput(out)).toMatchObject({ ok: true, keywords: ['statins', 'breast cancer'], via: 'json' });
    expect(parseKeywordOutput('<THINK>hmm, think</THINK>statins, tamoxifen')).toMatchObject({
      ok: true,
      keywords: ['statins', 'tamoxifen'],
    });
    expect(parseKeywordOutput('<thinking>okay\nthink\nso</thinking>\n- statins\n- aspirin')).toMatchObject({
      ok: true,
      keywords: ['statins', 'aspirin'],
    });
    expect(parseKeywordOutput('<think>a</think>statins<think>b, c</think>, aspirin').keywords).toEqual(['statins', 'aspirin']);
  });
  it('drops reasoning whose opening tag was in the prompt, and reasoning cut off before its end', () => {
    expect(parseKeywordOutput('okay, let me think\nabout it</think>\nstatins, aspirin').keywords).toEqual(['statins', 'aspirin']);
    expect(parseKeywordOutput('<think>okay, so the keywords would be think, okay')).toMatchObject({ ok: false, keywords: [] });
    expect(stripReasoning('statins <think>never closed')).toBe('statins ');
  });
  it('leaves output without reasoning alone', () => {
    for (const s of ['{"keywords": ["a b"]}', 'one; two', 'thinking machines, think tank']) expect(stripReasoning(s)).toBe(s);
    expect(parseKeywordOutput('thinking machines, think tank').keywords).toEqual(['thinking machines', 'think tank']);
  });
});
