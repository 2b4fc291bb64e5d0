// Name matching for the payee check (SPEC F). Pure and language-neutral: names are compared
// as words after Unicode compatibility decomposition, with accents, case and punctuation
// dropped, so "José Álvarez-Núñez" and "jose alvarez nunez" agree; scripts without case or
// accents (Greek, Cyrillic, Arabic, CJK) compare the same way, word by word.
//   match:       the same words in any order (courtesy titles ignored; legal forms too, for
//                entities)
//   close_match: every proposed word stands for a different registered word (the word itself,
//                its initial, or one typo on a word of four letters or more), registered
//                words left over are middle names only, and at least two words agree in full
//   no_match:    anything else

import { TITLES_BY_LANGUAGE } from './titles.js';
import { once } from '../../once.js';

export type NameResult = 'match' | 'close_match' | 'no_match';
export type SubjectType = 'natural_person' | 'legal_entity';

const LEGAL_FORMS = new Set([
  'ltd',
  'limited',
  'llc',
  'llp',
  'lp',
  'plc',
  'inc',
  'incorporated',
  'corp',
  'corporation',
  'co',
  'company',
  'pty',
  'pvt',
  'pte',
  'gmbh',
  'ag',
  'kg',
  'ohg',
  'ug',
  'eg',
  'ev',
  'se',
  'sa',
  'sas',
  'sarl',
  'sasu',
  'eurl',
  'sci',
  'snc',
  'bv',
  'nv',
  'vof',
  'cv',
  'spa',
  'srl',
  'sapa',
  'snc',
  'sl',
  'slu',
  'sau',
  'lda',
  'ltda',
  'me',
  'eireli',
  'oy',
  'oyj',
  'ab',
  'publ',
  'as',
  'asa',
  'aps',
  'a/s',
  'kk',
  'yk',
  'gk',
  'sp',
  'zoo',
  'spzoo',
  'sro',
  'as',
  'kft',
  'zrt',
  'nyrt',
  'doo',
  'ad',
  'ood',
  'ooo',
  'oao',
  'zao',
  'pao',
  'ao',
  'ооо',
  'оао',
  'зао',
  'пао',
  'ао',
  'ип',
  'ае',
  'επε',
  'ικε',
  'oe',
  'ee',
  'bhd',
  'sdn',
  'tbk',
  'pt',
  'cia',
  'cie',
  'et',
  'and',
  '&',
  '株式会社',
  '有限会社',
  '合同会社',
]);

/** Letters that carry their accent in the letter itself, with no Unicode decomposition. */
const FOLDS: Record<string, string> = {
  ł: 'l',
  đ: 'd',
  ð: 'd',
  ı: 'i',
  ø: 'o',
  æ: 'ae',
  œ: 'oe',
  ß: 'ss',
  þ: 'th',
  ħ: 'h',
  ŧ: 't',
  ŀ: 'l',
  ĸ: 'k',
};
const FOLDABLE = new RegExp(`[${Object.keys(FOLDS).join('')}]`, 'g');
/** Apostrophes join the parts of a word (O'Brien, O’Brien, D‘Angelo). */
const APOSTROPHES = /['’‘ʼ`´]/g;
/**
 * A raised a or o ends a Spanish or Portuguese abbreviation (Sr.ª, Dr.ª, Eng.º): it joins the
 * word. "D.ª" is written as its other abbreviation "Dña", as "da" would read as a name.
 */
const ORDINAL_ENDING = /(\p{L}+)\.?\s?([ªº])/gu;

function joinOrdinal(_match: string, stem: string, ordinal: string): string {
  if (ordinal === 'ª' && stem.toLowerCase() === 'd') return 'dña';
  return stem + (ordinal === 'ª' ? 'a' : 'o');
}

/** Case, accents and special letters folded; a raised ending joined to its abbreviation. */
function folded(text: string): string {
  return text
    .replace(ORDINAL_ENDING, joinOrdinal)
    .normalize('NFKD')
    .replace(/\p{M}+/gu, '')
    .toLowerCase()
    .replace(FOLDABLE, (c) => FOLDS[c]!)
    .replace(APOSTROPHES, '');
}

/**
 * Titles written with a dot or dash inside ("Sig.ra", "Dott. ssa", "г-жа") are one word: one
 * matcher for all of them, built from the title list, keeps the split below from cutting them.
 */
function innerPunctuationTitles(): RegExp {
  const forms = Object.values(TITLES_BY_LANGUAGE)
    .flat()
    .map(folded)
    .filter((title) => /[.-]\p{L}/u.test(title))
    .map((title) => title.replace(/[.-]$/, '').replace(/\./g, '\\.\\s?').replace(/-/g, '-\\s?'));
  return new RegExp(`(?<![\\p{L}\\p{N}])(?:${forms.join('|')})(?![\\p{L}\\p{N}])`, 'gu');
}
const JOINED_TITLES = innerPunctuationTitles();

/** Words of a name: folded as above, titles with inner punctuation joined, punctuation splits. */
export function nameWords(name: string): string[] {
  return folded(name)
    .replace(JOINED_TITLES, (title) => title.replace(/[.\s-]/g, ''))
    .split(/[^\p{L}\p{N}&]+/u)
    .filter((w) => w.length > 0);
}

/**
 * Every title of TITLES_BY_LANGUAGE as nameWords reads it: one word each. Read when a name is
 * first compared, not when the module loads (a start of every thread would pay for it).
 */
const courtesyTitlesRead = once(
  (): ReadonlySet<string> =>
    new Set(
      Object.values(TITLES_BY_LANGUAGE)
        .flat()
        .map((written) => {
          const words = nameWords(written);
          if (words.length !== 1) throw new Error(`title '${written}' does not read as one word`);
          return words[0]!;
        }),
    ),
);

/** Words of a name without the courtesy titles that lead it ("Dr", "Mme", "Herr"…). */
export function untitledWords(name: string): string[] {
  const words = nameWords(name);
  const titles = courtesyTitlesRead();
  let first = 0;
  while (first < words.length - 1 && titles.has(words[first]!)) first++;
  return words.slice(first);
}

/**
 * What makes two proposed names one name for the distinct-names allowance (P12): their words
 * without leading courtesy titles, in any order. Only a keyed digest of it is ever kept.
 */
export function nameIdentity(name: string): string {
  return [...untitledWords(name)].sort().join(' ');
}

/**
 * Legal forms written with dots ("S.p.A.", "B.V.") arrive as runs of single letters: join each
 * run.
 */
function joinLetterRuns(words: string[]): string[] {
  const out: string[] = [];
  let run = '';
  for (const w of words) {
    if ([...w].length === 1 && /\p{L}/u.test(w)) {
      run += w;
      continue;
    }
    if (run !== '') out.push(run);
    run = '';
    out.push(w);
  }
  if (run !== '') out.push(run);
  return out;
}

function significantWords(name: string, subjectType: SubjectType): string[] {
  const words = untitledWords(name);
  if (subjectType !== 'legal_entity') return words;
  const kept = joinLetterRuns(words).filter((w) => !LEGAL_FORMS.has(w));
  return kept.length > 0 ? kept : words;
}

/** At most one substitution, insertion, deletion or adjacent transposition apart. */
export function oneTypo(a: string, b: string): boolean {
  if (a === b) return true;
  const x = [...a];
  const y = [...b];
  if (Math.abs(x.length - y.length) > 1) return false;
  let i = 0;
  while (i < x.length && i < y.length && x[i] === y[i]) i++;
  if (x.length === y.length) {
    const rest = (k: number) => x.slice(k).join('') === y.slice(k).join('');
    const swapped = i + 1 < x.length && x[i] === y[i + 1] && x[i + 1] === y[i];
    return rest(i + 1) || (swapped && rest(i + 2));
  }
  const [longer, shorter] = x.length > y.length ? [x, y] : [y, x];
  return longer.slice(i + 1).join('') === shorter.slice(i).join('');
}

type Fit = 'exact' | 'typo' | 'initial' | null;

function fit(proposed: string, registered: string): Fit {
  if (proposed === registered) return 'exact';
  if ([...proposed].length === 1 && [...registered][0] === proposed) return 'initial';
  const long = [...proposed].length >= 4 && [...registered].length >= 4;
  if (long && oneTypo(proposed, registered)) return 'typo';
  return null;
}

export function matchName(
  registered: string,
  proposed: string,
  subjectType: SubjectType,
): NameResult {
  const reg = significantWords(registered, subjectType);
  const pro = significantWords(proposed, subjectType);
  if (reg.length === 0 || pro.length === 0) return 'no_match';
  const sorted = (w: string[]) => [...w].sort().join(' ');
  if (sorted(reg) === sorted(pro)) return 'match';
  return bestAssignment(reg, pro, subjectType) ? 'close_match' : 'no_match';
}

/** Tries every assignment of proposed words to distinct registered words (names are short). */
function bestAssignment(reg: string[], pro: string[], subjectType: SubjectType): boolean {
  if (pro.length > reg.length || reg.length > 12) return false;
  const used = new Array<boolean>(reg.length).fill(false);
  const search = (k: number, agreeing: number): boolean => {
    if (k === pro.length) {
      if (agreeing < 2) return false;
      // Only middle names may be missing from a person's name: the first and last must be named.
      if (subjectType === 'natural_person' && (!used[0] || !used[reg.length - 1])) return false;
      return true;
    }
    for (let r = 0; r < reg.length; r++) {
      if (used[r]) continue;
      const f = fit(pro[k]!, reg[r]!);
      if (f === null) continue;
      used[r] = true;
      if (search(k + 1, agreeing + (f === 'exact' || f === 'typo' ? 1 : 0))) return true;
      used[r] = false;
    }
    return false;
  };
  return search(0, 0);
}

/**
 * The masked name a payer may see: first given name and family-name initial, or an entity's
 * registered name.
 */
export function maskedName(registered: string, subjectType: SubjectType): string {
  if (subjectType === 'legal_entity') return registered.trim();
  const all = registered.trim().split(/\s+/);
  let first = 0;
  const titles = courtesyTitlesRead();
  while (first < all.length - 1 && titles.has(nameWords(all[first]!)[0] ?? '')) first++;
  const words = all.slice(first);
  if (words.length === 0) return '';
  if (words.length === 1) return words[0]!;
  return `${words[0]} ${[...words[words.length - 1]!][0]!.toUpperCase()}.`;
}
