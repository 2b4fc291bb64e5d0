// Courtesy and academic titles that may lead a name (SPEC F), per language, as people write them.
// The payee check ignores them at the start of a name only. No npm package keeps such a list
// per language (the name parsers carry one mixed, mostly English list), so each language's
// forms are taken from its reference list of abbreviations, cited beside it.
//
// Left out on purpose: one-letter abbreviations that read as an initial ("D." for don/dona,
// "G." for gospodin, "P." for pan/pani), and words that are also common given names where they
// lead a name ("Sri", "Dom"). "M." and "Г." were already ignored before this list was sourced
// and stay, although they too read as initials.

export const TITLES_BY_LANGUAGE: Readonly<Record<string, readonly string[]>> = {
  // Wikipedia, "English honorifics" (common titles and their abbreviations).
  en: [
    'Mr',
    'Mrs',
    'Ms',
    'Miss',
    'Mx',
    'Master',
    'Mister',
    'Dr',
    'Doctor',
    'Prof',
    'Professor',
    'Sir',
    'Dame',
    'Lord',
    'Lady',
    'Madam',
    'Rev',
    'Revd',
    'Reverend',
    'Hon',
    'Fr',
  ],
  // Duden, Rechtschreibung: the abbreviations Hr., Fr., Frl., Dr., Prof., Dipl.-Ing.
  de: ['Herr', 'Hr.', 'Frau', 'Fr.', 'Fräulein', 'Frl.', 'Dr.', 'Prof.', 'Dipl.', 'Ing.'],
  // Real Academia Española, Ortografía de la lengua española (2010), "Lista de abreviaturas"
  // (rae.es/buen-uso-español/lista-de-abreviaturas): tratamientos and títulos.
  es: [
    'Sr.',
    'Sra.',
    'Sr.ª',
    'Srta.',
    'Señor',
    'Señora',
    'Señorita',
    'Don',
    'Doña',
    'Dña.',
    'D.ª',
    'Dr.',
    'Dra.',
    'Dr.ª',
    'Lic.',
    'Lcdo.',
    'Lcda.',
    'Ldo.',
    'Lda.',
    'Ing.',
    'Prof.',
    'Profa.',
    'Excmo.',
    'Excma.',
    'Ilmo.',
    'Ilma.',
  ],
  // Academia Brasileira de Letras, Vocabulário Ortográfico da Língua Portuguesa, "Reduções";
  // Ciberdúvidas da Língua Portuguesa, "Formas de tratamento" (abbreviations of address).
  pt: [
    'Sr.',
    'Sr.ª',
    'Sra.',
    'Srta.',
    'Sr.ta',
    'Snr.',
    'Snr.ª',
    'Senhor',
    'Senhora',
    'Senhorita',
    'Dona',
    'D.ª',
    'Dr.',
    'Dr.ª',
    'Dra.',
    'Doutor',
    'Doutora',
    'Prof.',
    'Prof.ª',
    'Profa.',
    'Eng.',
    'Eng.º',
    'Eng.ª',
    'Exmo.',
    'Exma.',
    'Ex.mo',
    'Ex.ma',
    'Ilmo.',
    'Ilma.',
  ],
  // Office québécois de la langue française, Banque de dépannage linguistique, "Abréviations
  // des titres de civilité"; Lexique des règles typographiques de l'Imprimerie nationale.
  fr: [
    'M.',
    'Monsieur',
    'Mme',
    'Madame',
    'Mlle',
    'Mademoiselle',
    'Me',
    'Maître',
    'Dr',
    'Docteur',
    'Dre',
    'Docteure',
    'Pr',
    'Professeur',
    'Professeure',
    'Mgr',
  ],
  // Treccani, Vocabolario, "abbreviazioni" of titles of address and of profession.
  it: [
    'Sig.',
    'Sig.ra',
    'Sig.na',
    'Signor',
    'Signore',
    'Signora',
    'Signorina',
    'Dott.',
    'Dott.ssa',
    'Dr.',
    'Prof.',
    'Prof.ssa',
    'Ing.',
    'Avv.',
    'Arch.',
    'Geom.',
    'Rag.',
  ],
  // Nederlandse Taalunie, Taaladvies ("De heer dr. A. Jansen"; "Dr, ir, mr / dr., ir., mr.").
  nl: [
    'Dhr.',
    'Mevr.',
    'Mw.',
    'Mevrouw',
    'Mej.',
    'Mejuffrouw',
    'Mr.',
    'Dr.',
    'Drs.',
    'Ir.',
    'Ing.',
    'Prof.',
  ],
  // Wielki słownik ortograficzny PWN and Poradnia językowa PWN (forms of address, titles).
  pl: ['Pan', 'Pani', 'Panna', 'Dr', 'Prof.', 'Mgr', 'Inż.', 'Hab.'],
  // Institut za hrvatski jezik i jezikoslovlje, Hrvatski pravopis, "Kratice" (gđa, gđica).
  sh: [
    'Gospodin',
    'Gospođa',
    'Gospodja',
    'Gospođica',
    'Gospodjica',
    'Gđa',
    'Gdja',
    'Gđica',
    'Gdjica',
  ],
  // Türk Dil Kurumu, Yazım Kılavuzu, "Kısaltmalar dizini" (Sn., Dr., Doç., Prof.).
  tr: ['Bay', 'Bayan', 'Sayın', 'Sn.', 'Dr.', 'Doç.', 'Prof.'],
  // Hindi in Latin letters: the forms used in Government of India documents and listed by
  // Wikipedia, "Indian honorifics".
  hi: ['Shri', 'Shree', 'Shrimati', 'Smt.', 'Kumari', 'Km.', 'Sushri'],
  // В. В. Лопатин (ред.), Правила русской орфографии и пунктуации (2006), графические
  // сокращения: г., г-н, г-жа, д-р, проф.
  ru: ['г.', 'г-н', 'г-жа', 'господин', 'госпожа', 'д-р', 'проф.'],
  // Ινστιτούτο Νεοελληνικών Σπουδών, Λεξικό της κοινής νεοελληνικής, συντομογραφίες.
  el: ['κ.', 'κος', 'κα', 'κύριος', 'κυρία', 'δεσποινίς', 'δνίς', 'δις', 'Δρ', 'καθ.'],
};
