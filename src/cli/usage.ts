// Help and usage errors of the `path-node` command (P15, issue 31), all printed from the table of
// commands (commands.ts): the list of commands, one command's flags with their defaults,
// environment variables and examples, and for a mistake the one command's usage and the nearest
// command or flag it may have meant. The same table says which words name a command and which
// flags each accepts, so nothing is explained that the parser would refuse, or the reverse.
import type { FlagSpec } from '../config.js';
import { HELP_FLAG, TABLE as COMMANDS, type Command, type CommandSpec } from './commands.js';

/** A mistake on the command line: exit code 2, the message and the usage that fits it. */
export class UsageError extends Error {
  override name = 'UsageError';
  constructor(
    message: string,
    /** The command whose usage is printed; none: the list of commands. */
    readonly command?: CommandSpec,
  ) {
    super(message);
  }
}

type Flags = Record<string, string | true>;

/** Help's width: wider lines are wrapped. */
const WIDTH = 100;
/** Where flags' sentences begin in a command's help, unless the flag is wider. */
const FLAG_COLUMN = 30;

/** The flags a command accepts: its own, and --help. */
export const flagsOf = (command: CommandSpec): readonly FlagSpec[] => [...command.flags, HELP_FLAG];

/** Flags that never take a value in any command, so that a word after them is a command word. */
export const SWITCHES: ReadonlySet<string> = new Set(
  COMMANDS.flatMap((c) =>
    flagsOf(c)
      .filter((f) => f.switch === true)
      .map((f) => f.name),
  ),
);

const wordsOf = (command: CommandSpec): string[] => command.name.split(' ');

/** The command `words` name and the words after its name (none: `serve`, P15). */
export function commandOf(words: readonly string[]): { command: Command; operands: string[] } {
  if (words.length === 0)
    return { command: COMMANDS.find((c) => c.name === 'serve')!, operands: [] };
  const command = COMMANDS.find((c) => wordsOf(c).every((w, i) => words[i] === w));
  if (command !== undefined) return { command, operands: words.slice(wordsOf(command).length) };
  const group = groupOf(words[0]!);
  if (group.length > 0 && words.length === 1) {
    const subs = group.map((c) => wordsOf(c)[1]).join(', ');
    throw new UnknownCommand(`${words[0]} needs one of: ${subs}`);
  }
  throw unknownCommand(words, group.length > 0 ? 2 : 1);
}

/** Words that name no command: thrown before any command is known, so the list follows it. */
export class UnknownCommand extends UsageError {
  override name = 'UnknownCommand';
}

/**
 * The words named no command: the nearest command or group, each compared with as many of the
 * words as it has (`credential create` is one letter from `credentials create`).
 */
function unknownCommand(words: readonly string[], known: number): UnknownCommand {
  const candidates = [...COMMANDS.map((c) => c.name), ...groupNames()];
  let best: { named: string; near: string } | undefined;
  for (const candidate of candidates) {
    const named = words.slice(0, candidate.split(' ').length).join(' ');
    // A group named exactly (`credentials frob`) is no suggestion: its second word is wrong.
    if (named === candidate) continue;
    const near = nearest(named, [candidate]);
    const closer =
      best === undefined || distance(named, near ?? '') < distance(best.named, best.near);
    if (near !== undefined && closer) best = { named, near };
  }
  if (best === undefined)
    return new UnknownCommand(`unknown command '${words.slice(0, known).join(' ')}'`);
  return new UnknownCommand(`unknown command '${best.named}'; did you mean '${best.near}'?`);
}

/** The commands whose first word is `word` when it names a group (`credentials add|create`). */
export function groupOf(word: string): CommandSpec[] {
  const members = COMMANDS.filter((c) => wordsOf(c).length > 1 && wordsOf(c)[0] === word);
  return members;
}

const groupNames = (): string[] => [
  ...new Set(COMMANDS.filter((c) => wordsOf(c).length > 1).map((c) => wordsOf(c)[0]!)),
];

/**
 * Checks a command's words and flags against the table, in the order given: a flag it does not
 * take (with the nearest one it does), a value missing, a required flag absent, a word too many.
 */
export function checkUsage(command: CommandSpec, operands: readonly string[], flags: Flags): void {
  const accepted = flagsOf(command);
  for (const [name, value] of Object.entries(flags)) {
    const spec = accepted.find((f) => f.name === name);
    if (spec === undefined) {
      const near = nearest(
        name,
        accepted.map((f) => f.name),
      );
      const hint = near === undefined ? '' : `; did you mean --${near}?`;
      throw new UsageError(`unknown flag --${name}${hint}`, command);
    }
    if (spec.argument !== undefined && (value === true || value === ''))
      throw new UsageError(`--${name} needs a value (${spec.argument})`, command);
  }
  for (const spec of command.flags) {
    if (spec.required === true && flags[spec.name] === undefined)
      throw new UsageError(`--${spec.name} is required`, command);
  }
  const operand = command.operand;
  if (operand !== undefined && operand.optional !== true && operands.length === 0)
    throw new UsageError(`${command.name} needs ${operand.name}`, command);
  const allowed = operand === undefined ? 0 : command.name === 'help' ? Infinity : 1;
  if (operands.length > allowed)
    throw new UsageError(`unexpected word '${operands[allowed]}' after ${command.name}`, command);
}

/** Levenshtein's distance between two words: the fewest one-letter edits from one to the other. */
export function distance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) {
      const swap = row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1);
      next.push(Math.min(row[j]! + 1, next[j - 1]! + 1, swap));
    }
    row = next;
  }
  return row[b.length]!;
}

/**
 * What `word` was most likely meant to be: a candidate it begins, else the closest one within
 * a third of its length (at least 2 edits); none when every candidate is further.
 */
export function nearest(word: string, candidates: readonly string[]): string | undefined {
  const begun = candidates.filter((c) => word.length >= 2 && c.startsWith(word));
  if (begun.length > 0) return begun.sort((x, y) => x.length - y.length)[0];
  let best: string | undefined;
  let bestDistance = Math.max(2, Math.floor(word.length / 3)) + 1;
  for (const candidate of candidates) {
    const d = distance(word, candidate);
    if (d < bestDistance) [best, bestDistance] = [candidate, d];
  }
  return best;
}

/** Words wrapped to `WIDTH` columns, every line after the first indented by `indent`. */
function wrap(first: string, words: readonly string[], indent: number): string {
  const lines = [first];
  for (const word of words) {
    const line = lines[lines.length - 1]!;
    if (line.trimEnd().length > indent && line.length + 1 + word.length > WIDTH)
      lines.push(' '.repeat(indent) + word);
    else
      lines[lines.length - 1] = line.endsWith(' ') || line === '' ? line + word : `${line} ${word}`;
  }
  return lines.join('\n');
}

/** `--port 8080` in a synopsis: required flags bare, others in brackets with their default. */
function synopsisWord(flag: FlagSpec, alternative = false): string {
  const shown = flag.required === true || alternative || flag.defaultShown !== undefined;
  const value = shown ? flag.argument : (flag.default ?? flag.argument);
  const word = value === undefined ? `--${flag.name}` : `--${flag.name} ${value}`;
  return flag.required === true || alternative ? word : `[${word}]`;
}

/** The command's synopsis, wrapped: `path-node keys rotate (--data-dir D | --store URL)`. */
export function synopsisOf(command: CommandSpec): string {
  const words: string[] = [];
  if (command.operand !== undefined)
    words.push(
      command.operand.optional === true ? `[${command.operand.name}]` : command.operand.name,
    );
  const either: readonly string[] = command.either ?? [];
  const pair = command.flags.filter((f) => either.includes(f.name));
  if (pair.length > 0) words.push(`(${pair.map((f) => synopsisWord(f, true)).join(' | ')})`);
  for (const flag of command.flags) if (!either.includes(flag.name)) words.push(synopsisWord(flag));
  const head = `  path-node ${command.name}`;
  return wrap(head, words, head.length + 1);
}

const usageOf = (commands: readonly CommandSpec[]): string =>
  `usage:\n${commands.map(synopsisOf).join('\n')}`;

/** `default: 8080; environment: PATH_PORT; example: --port 9000`, each part kept whole. */
function detailsOf(flag: FlagSpec): string[] {
  const fallback = flag.defaultShown ?? flag.default;
  const parts = [
    flag.required === true
      ? 'required'
      : fallback === undefined
        ? undefined
        : `default: ${fallback}`,
    flag.env === undefined ? undefined : `environment: ${flag.env}`,
    `example: --${flag.name}${flag.example === '' ? '' : ` ${flag.example}`}`,
  ].filter((part) => part !== undefined);
  return parts.map((part, i) => (i < parts.length - 1 ? `${part};` : part));
}

/** One flag in a command's help: its name and value, its sentence, then its details. */
function flagHelp(flag: FlagSpec): string {
  const head = `  --${flag.name}${flag.argument === undefined ? '' : ` ${flag.argument}`}`;
  const first =
    head.length + 2 <= FLAG_COLUMN
      ? head.padEnd(FLAG_COLUMN)
      : `${head}\n${' '.repeat(FLAG_COLUMN)}`;
  const sentence = wrap(first, flag.sentence.split(' '), FLAG_COLUMN);
  return `${sentence}\n${wrap(' '.repeat(FLAG_COLUMN), detailsOf(flag), FLAG_COLUMN)}`;
}

/** `path-node help COMMAND`: the synopsis, what it does, each flag, and an example. */
export function helpOf(command: CommandSpec): string {
  const operand = command.operand;
  return [
    usageOf([command]),
    '',
    command.sentence,
    ...(command.detail === undefined ? [] : [wrap('', command.detail.split(' '), 0)]),
    ...(operand === undefined
      ? []
      : [
          '',
          'argument:',
          wrap(`  ${operand.name}`.padEnd(FLAG_COLUMN), operand.sentence.split(' '), FLAG_COLUMN),
        ]),
    '',
    'flags:',
    ...flagsOf(command).map(flagHelp),
    '',
    'example:',
    wrap(`    ${command.example.split(' ')[0]}`, command.example.split(' ').slice(1), 6),
  ].join('\n');
}

/** Every command and its sentence, as `path-node help` lists them. */
export function commandList(): string {
  const column = Math.max(...COMMANDS.map((c) => `  path-node ${c.name}`.length)) + 2;
  const lines = COMMANDS.map((c) =>
    wrap(`  path-node ${c.name}`.padEnd(column), c.sentence.split(' '), column),
  );
  return `usage: path-node COMMAND [FLAGS]   (no command: serve)\n\ncommands:\n${lines.join('\n')}`;
}

/** `path-node help` and `path-node --help`. */
export function helpIndex(): string {
  return [
    "path-node: one operator's node in the Path payment network.",
    '',
    commandList(),
    '',
    '`path-node help COMMAND` or `path-node COMMAND --help` gives its flags, their defaults and',
    'environment variables, and an example.',
  ].join('\n');
}

/** Help for the words given: the list, a command's help, or a group's synopses. */
export function helpFor(words: readonly string[]): string {
  if (words.length === 0) return helpIndex();
  const group = words.length === 1 ? groupOf(words[0]!) : [];
  if (group.length > 0) return `${usageOf(group)}\n\n${hintFor(words[0]!)}`;
  const { command, operands } = commandOf(words);
  // `help help` explains help itself; `help help serve` explains serve.
  if (command.name === 'help' && operands.length > 0) return helpFor(operands);
  return helpOf(command);
}

const hintFor = (name: string): string =>
  `\`path-node help ${name}\` gives each flag, its default and an example.`;

/** What a usage error prints after its message: its command's usage, or the list. */
export function usageFor(error: UsageError, words: readonly string[]): string {
  if (error.command !== undefined)
    return `${usageOf([error.command])}\n${hintFor(error.command.name)}`;
  const group = words.length > 0 ? groupOf(words[0]!) : [];
  if (group.length > 0 && words.length === 1) return `${usageOf(group)}\n${hintFor(words[0]!)}`;
  return commandList();
}
