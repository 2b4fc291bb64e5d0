// SPEC F name matching and masking, over the table in name-pairs.json (many languages and
// scripts, accents, courtesy titles, legal forms, initials, typos, missing middle names, word
// order, punctuation). Each row's `expected` is what SPEC F's rules give for the pair:
//   match:       the same words in any order, ignoring case, accents, punctuation, courtesy titles
//   close_match: every proposed word stands for a registered one (an initial, one typo on a word
//                of four or more letters, a missing middle name) with at least two words agreeing
//   no_match:    otherwise; for a legal entity, legal-form words are ignored.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  maskedName,
  matchName,
  nameIdentity,
  oneTypo,
  untitledWords,
  type NameResult,
  type SubjectType,
} from './names.js';
import { TITLES_BY_LANGUAGE } from './titles.js';

interface Pair {
  registered: string;
  proposed: string;
  subject_type: SubjectType;
  expected: NameResult;
  note: string;
}

const table = readFileSync(new URL('./name-pairs.json', import.meta.url), 'utf8');
const pairs = JSON.parse(table) as Pair[];

describe('SPEC F name pairs table (name-pairs.json)', () => {
  it('holds 60 well-formed pairs or more: all three results, both subject types, scripts', () => {
    expect(pairs.length).toBeGreaterThanOrEqual(60);
    for (const p of pairs) {
      expect(typeof p.registered).toBe('string');
      expect(typeof p.proposed).toBe('string');
      expect(['natural_person', 'legal_entity']).toContain(p.subject_type);
      expect(['match', 'close_match', 'no_match']).toContain(p.expected);
      expect(p.note.length).toBeGreaterThan(0);
    }
    const count = (r: NameResult) => pairs.filter((p) => p.expected === r).length;
    expect(count('match')).toBeGreaterThanOrEqual(10);
    expect(count('close_match')).toBeGreaterThanOrEqual(10);
    expect(count('no_match')).toBeGreaterThanOrEqual(10);
    const entities = pairs.filter((p) => p.subject_type === 'legal_entity');
    expect(entities.length).toBeGreaterThanOrEqual(10);
    const text = pairs.map((p) => p.registered + p.proposed).join(' ');
    const scripts = [
      /\p{Script=Greek}/u,
      /\p{Script=Cyrillic}/u,
      /\p{Script=Arabic}/u,
      /\p{Script=Han}/u,
      /\p{Script=Katakana}/u,
    ];
    for (const script of scripts) {
      expect(script.test(text), String(script)).toBe(true);
    }
  });

  const title = (p: Pair) =>
    `${p.note}: ${JSON.stringify(p.registered)} vs ${JSON.stringify(p.proposed)} -> ${p.expected}`;
  it.each(pairs.map((p) => [title(p), p] as const))('SPEC F %s', (_title, p) => {
    expect(matchName(p.registered, p.proposed, p.subject_type)).toBe(p.expected);
  });

  it('SPEC F: match is symmetric (every match pair also matches the other way round)', () => {
    for (const p of pairs.filter((q) => q.expected === 'match')) {
      const pair = `${p.registered} / ${p.proposed}`;
      expect(matchName(p.proposed, p.registered, p.subject_type), pair).toBe('match');
    }
  });
});

describe('SPEC F matching rules, one at a time', () => {
  it('legal-form words are ignored for a legal entity only, not for a person', () => {
    expect(matchName('Acme Widgets Ltd', 'Acme Widgets', 'legal_entity')).toBe('match');
    expect(matchName('Acme Widgets Ltd', 'Acme Widgets', 'natural_person')).not.toBe('match');
  });

  it('a typo counts on a word of four letters or more, not on a three-letter word', () => {
    expect(matchName('Omar Khalid Farouk', 'Omer Khalid Farouk', 'natural_person')).toBe(
      'close_match',
    );
    expect(matchName('Tom Khalid Farouk', 'Tim Khalid Farouk', 'natural_person')).toBe('no_match');
  });

  it('one typo per word only: two edits on one word is no_match', () => {
    const registered = 'Jonathan Edward Davies';
    expect(matchName(registered, 'Jonathon Edward Davies', 'natural_person')).toBe('close_match');
    expect(matchName(registered, 'Jonothon Edward Davies', 'natural_person')).toBe('no_match');
  });

  it('an empty or title-only proposal is no_match, never match', () => {
    expect(matchName('John Smith', '', 'natural_person')).toBe('no_match');
    expect(matchName('John Smith', 'Mr.', 'natural_person')).toBe('no_match');
    expect(matchName('John Smith', '...', 'natural_person')).toBe('no_match');
  });
});

describe('P12 nameIdentity: two proposed names are one for the distinct-names allowance', () => {
  it('with the same words in any order, whatever the case, accents, punctuation, titles', () => {
    const one = nameIdentity('José Álvarez');
    for (const same of ['jose alvarez', 'ÁLVAREZ, José', 'Sr. José Álvarez', 'José  Álvarez.']) {
      expect(nameIdentity(same), same).toBe(one);
    }
    expect(nameIdentity('José Álvarez Núñez')).not.toBe(one);
  });
});

describe('SPEC F courtesy titles, for each language the matcher claims (titles.ts)', () => {
  it('claims these languages', () => {
    expect(Object.keys(TITLES_BY_LANGUAGE).sort()).toEqual([
      'de',
      'el',
      'en',
      'es',
      'fr',
      'hi',
      'it',
      'nl',
      'pl',
      'pt',
      'ru',
      'sh',
      'tr',
    ]);
  });

  it('lists the feminine forms of Spanish and Portuguese (issue 11 item 13)', () => {
    const spanish = ['Sra.', 'Srta.', 'Dña.', 'Doña', 'Dra.', 'D.ª'];
    const portuguese = ['Sra.', 'Sr.ª', 'Senhora', 'D.ª', 'Dona', 'Dra.'];
    expect(TITLES_BY_LANGUAGE.es).toEqual(expect.arrayContaining(spanish));
    expect(TITLES_BY_LANGUAGE.pt).toEqual(expect.arrayContaining(portuguese));
  });

  const written = Object.entries(TITLES_BY_LANGUAGE).flatMap(([language, titles]) =>
    titles.map((t) => [language, t] as const),
  );
  it.each(written)('%s: "%s" leading a name is ignored on either side, never shown', (_, title) => {
    expect(matchName('Maria Silva', `${title} Maria Silva`, 'natural_person')).toBe('match');
    expect(matchName(`${title} Maria Silva`, 'Maria Silva', 'natural_person')).toBe('match');
    expect(matchName('Maria Silva', `${title} Maria Silvia`, 'natural_person')).toBe('close_match');
    expect(maskedName(`${title} Maria Silva`, 'natural_person')).toBe('Maria S.');
  });

  it('titles are ignored only where they lead: inside a name they are words', () => {
    expect(untitledWords('Sra. Doña Carmen Ruiz')).toEqual(['carmen', 'ruiz']);
    expect(matchName('Carmen Ruiz', 'Carmen Doña Ruiz', 'natural_person')).toBe('no_match');
  });

  it('a title alone is not dropped to nothing: it stays the only word', () => {
    expect(untitledWords('Senhora')).toEqual(['senhora']);
  });

  it('a raised a (ª) joins its abbreviation, and "D.ª" does not read as the name "Da"', () => {
    expect(untitledWords('D.ª Ana Sousa')).toEqual(['ana', 'sousa']);
    expect(untitledWords('Dª Ana Sousa')).toEqual(['ana', 'sousa']);
    expect(untitledWords('Da Wei Zhang')).toEqual(['da', 'wei', 'zhang']);
  });
});

describe('SPEC F maskedName', () => {
  it('a person: first given name and family-name initial, the family name never whole', () => {
    expect(maskedName('John Smith', 'natural_person')).toBe('John S.');
    expect(maskedName('John Michael Smith', 'natural_person')).toBe('John S.');
    const masked = maskedName('Katarzyna Anna Nowak', 'natural_person');
    expect(masked).toBe('Katarzyna N.');
    expect(masked).not.toContain('Nowak');
    expect(masked).not.toContain('Anna');
  });

  it('a person: a courtesy title is not the first given name', () => {
    expect(maskedName('Mr John Smith', 'natural_person')).toBe('John S.');
    expect(maskedName('Dr. Anna Maria Müller', 'natural_person')).toBe('Anna M.');
  });

  it('a person in other scripts and with accents keeps the letters as registered', () => {
    expect(maskedName('José Álvarez-Núñez', 'natural_person')).toBe('José Á.');
    expect(maskedName('Иван Петрович Сидоров', 'natural_person')).toBe('Иван С.');
    expect(maskedName('Γιώργος Παπαδόπουλος', 'natural_person')).toBe('Γιώργος Π.');
  });

  it('a legal entity: the registered name, legal form included', () => {
    expect(maskedName('Acme Widgets Ltd', 'legal_entity')).toBe('Acme Widgets Ltd');
    expect(maskedName('ООО «Северный Ветер»', 'legal_entity')).toBe('ООО «Северный Ветер»');
    const registered = 'Fiat Chrysler Automobiles S.p.A.';
    expect(maskedName(registered, 'legal_entity')).toBe(registered);
  });
});

describe('SPEC F oneTypo (the "one typo" of close_match)', () => {
  it('accepts one substitution, insertion, deletion or adjacent transposition', () => {
    expect(oneTypo('oliveira', 'oliveira')).toBe(true);
    expect(oneTypo('jonathan', 'jonathon')).toBe(true); // substitution
    expect(oneTypo('hollande', 'holande')).toBe(true); // deletion
    expect(oneTypo('muller', 'mueller')).toBe(true); // insertion
    expect(oneTypo('dubois', 'dubios')).toBe(true); // adjacent transposition
    expect(oneTypo('oliveira', 'oliviera')).toBe(true); // adjacent transposition inside
    expect(oneTypo('smith', 'smiht')).toBe(true); // transposition at the end
    expect(oneTypo('smith', 'msith')).toBe(true); // transposition at the start
  });

  it('refuses two edits, a length change of two, and non-adjacent swaps', () => {
    expect(oneTypo('jonathan', 'jonothon')).toBe(false);
    expect(oneTypo('katarzyna', 'katazina')).toBe(false);
    expect(oneTypo('smith', 'smithson')).toBe(false);
    expect(oneTypo('abcd', 'dbca')).toBe(false);
  });

  it('counts characters, not UTF-16 units (astral and non-Latin letters)', () => {
    expect(oneTypo('сидоров', 'сидорав')).toBe(true);
    expect(oneTypo('𠮷田太郎', '𠮷野太郎')).toBe(true);
    expect(oneTypo('𠮷田', '田')).toBe(true);
    expect(oneTypo('𠮷田太郎', '吉野太郎')).toBe(false);
  });
});
