import { describe, expect, it } from 'vitest';
import { parseKeywordOutput } from '../../generators/parse.ts';

describe('tolerant keyword parser: prose is not a keyword list', () => {
  it('rejects a short refusal with a comma and a full stop', () => {
    expect(parseKeywordOutput('I cannot help with that request, sorry.').ok).toBe(false);
    expect(parseKeywordOutput('Sure! Here is what I think about the query.').ok).toBe(false);
  });
  it('still accepts short keyword lists that end with a full stop', () => {
    expect(parseKeywordOutput('breast cancer, tamoxifen, hormone therapy.')).toMatchObject({ ok: true, keywords: ['breast cancer', 'tamoxifen', 'hormone therapy'] });
    expect(parseKeywordOutput('statins\nbreast cancer survival')).toMatchObject({ ok: true, keywords: ['statins', 'breast cancer survival'] });
  });
});
