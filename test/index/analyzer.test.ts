import { describe, expect, it } from 'vitest';
import { getAnalyzer, textTokens } from '../../index/text/analyzer.ts';
import { KeywordView } from '../../index/view/view.ts';

describe('analyzers', () => {
  it('english stems word by word and keeps stop words inside keywords', () => {
    const en = getAnalyzer('english');
    expect(en.key('statins')).toBe('statin');
    expect(en.key('quality of life')).toBe('qualiti of life');
    expect(en.key('running shoes')).toBe(en.key('run shoe'));
    expect(getAnalyzer('none').key('statins')).toBe('statins');
  });

  it('text tokens drop stop words and are analysed', () => {
    expect(textTokens('The Statins, and HEART-failure!', getAnalyzer('english'))).toEqual(['statin', 'heart', 'failur']);
    expect(textTokens('The Statins', getAnalyzer('none'))).toEqual(['statins']);
  });

  it('a view matches on the analysed key and keeps the surface form for display', () => {
    const v = KeywordView.build(
      'item',
      0,
      [
        { id: 'a', self: 'Statin therapy', keywords: ['statin', 'LDL cholesterol'] },
        { id: 'b', self: '', keywords: ['statin'] },
        { id: 'c', self: '', keywords: ['statins'] },
      ],
      { analyzer: 'english' },
    );
    expect(Array.from(v.match({ keywords: ['statins'] })).map((e) => v.id(e))).toEqual(['a', 'b', 'c']);
    const o = v.probeKeywordOrdinals({ keywords: ['Statins'] })[0];
    expect(v.surface(o)).toBe('statin'); // the most frequent surface form
    const none = KeywordView.build('item', 0, [{ id: 'a', self: '', keywords: ['statin'] }], { analyzer: 'none' });
    expect(none.match({ keywords: ['statins'] }).length).toBe(0);
  });
});
