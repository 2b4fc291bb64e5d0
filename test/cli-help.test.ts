// Help for people (issue 31 item 4, P15): `path-node help [COMMAND]` and `COMMAND --help` give
// each flag a sentence, its default, its environment variable and an example; a usage error
// prints that one command's usage and the nearest command or flag. Run as the real command.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, SERVE_FLAGS, type Config } from '../src/config.js';
import { TABLE } from '../src/cli/commands.js';
import { CLI, removeDir, tempDir } from './support/harness.js';

interface Run { status: number | null; stdout: string; stderr: string }

let scratch: string;

beforeAll(() => { scratch = tempDir('cli-help'); });
afterAll(() => removeDir(scratch));

/** The command in a scratch directory (a default ./data never lands in the repository). */
function cli(args: string[]): Run {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', cwd: scratch, timeout: 30_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Help's text with its wrapping undone: every run of spaces and line breaks as one space. */
const flat = (text: string): string => text.replace(/\s+/g, ' ');

/** The lines of a usage that begin a command's synopsis. */
const synopses = (text: string): string[] => text.split('\n').filter((l) => l.startsWith('  path-node '));

describe('issue 31 item 4: path-node help', () => {
  it('path-node help and path-node --help list every command with its one-line sentence, on stdout, exit 0', () => {
    for (const args of [['help'], ['--help'], ['-h']]) {
      const run = cli(args);
      expect({ args, status: run.status, stderr: run.stderr }).toEqual({ args, status: 0, stderr: '' });
      const lines = run.stdout.split('\n');
      for (const command of TABLE) {
        const line = lines.find((l) => l.startsWith(`  path-node ${command.name} `));
        expect(line, `${args}: ${command.name}`).toBeDefined();
        // The sentence on the command's own line: one line each.
        expect(line!.replace(/\s+/g, ' ')).toBe(`  path-node ${command.name} ${command.sentence}`.replace(/\s+/g, ' '));
      }
    }
  });

  it('help serve, serve --help and serve -h print the same help: each flag with its sentence, default, environment variable and example', () => {
    const help = cli(['help', 'serve']);
    expect(help.status, help.stderr).toBe(0);
    expect(cli(['serve', '--help']).stdout).toBe(help.stdout);
    expect(cli(['serve', '-h']).stdout).toBe(help.stdout);
    const text = flat(help.stdout);
    expect(synopses(help.stdout)).toHaveLength(1);
    expect(help.stdout).toContain('path-node serve [--port 8080] [--host 127.0.0.1]');
    // Literally, for the flags a new operator meets first.
    expect(text).toContain('--port PORT The port of the HTTP API; 0 picks a free one. ' +
      'default: 8080; environment: PATH_PORT; example: --port 9000');
    expect(text).toContain('--admin-port PORT The port of the operator\'s listener: metrics, health, readiness (P21). ' +
      'default: 8082; environment: PATH_ADMIN_PORT; example: --admin-port 9082');
    expect(text).toContain('--workers N Shard worker threads, from 1 to 64. default: cores - 1, at least 1; ' +
      'environment: PATH_WORKERS; example: --workers 4');
    for (const flag of SERVE_FLAGS) {
      expect(text).toContain(`--${flag.name}`);
      expect(text).toContain(flag.sentence);
      expect(text).toContain(`environment: PATH_${flag.name.toUpperCase().replaceAll('-', '_')}`);
      expect(text).toContain(`example: --${flag.name}`);
    }
    expect(text).toMatch(/example: path-node serve --data-dir \S+ --member/);
  });

  it('every flag each command accepts has a sentence, its default (or "required"), its environment variable and an example in its help', () => {
    for (const command of TABLE) {
      const run = cli(['help', ...command.name.split(' ')]);
      expect({ command: command.name, status: run.status }).toEqual({ command: command.name, status: 0 });
      const text = flat(run.stdout);
      expect(synopses(run.stdout)).toHaveLength(1);
      expect(text).toContain(command.sentence);
      expect(text).toContain(`example: ${command.example}`);
      for (const flag of command.flags) {
        const where = `${command.name} --${flag.name}`;
        expect(flag.sentence.trim(), where).toMatch(/^[A-Z(].{10,}\.$/);
        const fallback = flag.required === true ? 'required' : flag.defaultShown ?? flag.default;
        const details = [
          fallback === undefined ? undefined : fallback === 'required' ? 'required' : `default: ${fallback}`,
          flag.env === undefined ? undefined : `environment: ${flag.env}`,
          `example: --${flag.name}${flag.example === '' ? '' : ` ${flag.example}`}`,
        ].filter((d) => d !== undefined).join('; ');
        const head = `--${flag.name}${flag.argument === undefined ? '' : ` ${flag.argument}`}`;
        expect(text, where).toContain(`${head} ${flag.sentence} ${details}`);
        // The synopsis names it too.
        expect(flat(run.stdout.split('\n\n')[0]!), where).toContain(`--${flag.name}`);
      }
    }
  });

  it('the parser accepts exactly the flags help gives: each of them passes, the first other one is refused by name', () => {
    // Flags are checked in the order given: a refusal that names the flag put last shows that
    // every flag of the table before it was accepted.
    for (const command of TABLE) {
      const operand = command.operand === undefined || command.operand.optional === true ? [] : ['evt_x'];
      const flags = command.flags.flatMap((f) => (f.argument === undefined ? [`--${f.name}`] : [`--${f.name}`, f.example]));
      const run = cli([...command.name.split(' '), ...operand, ...flags, '--zz-not-a-flag', 'x']);
      expect({ command: command.name, status: run.status }).toEqual({ command: command.name, status: 2 });
      expect(run.stderr, command.name).toContain('path-node: unknown flag --zz-not-a-flag\n');
      expect(run.stdout).toBe('');
    }
  });

  it('a flag that never takes a value is such in every command (the words are split before the command is known)', () => {
    const kinds = new Map<string, boolean>();
    for (const command of TABLE) {
      for (const flag of command.flags) {
        const isSwitch = flag.switch === true;
        expect(kinds.get(flag.name) ?? isSwitch, `--${flag.name}`).toBe(isSwitch);
        kinds.set(flag.name, isSwitch);
      }
    }
  });

  it('serve takes the defaults help gives, and reads the environment variable help names (each example is a value it takes)', () => {
    const config = loadConfig({}, {}) as unknown as Record<string, unknown>;
    const field = (flag: string) => flag.replace(/-(.)/g, (_, c: string) => c.toUpperCase()) as keyof Config;
    for (const flag of SERVE_FLAGS) {
      if ('default' in flag) expect(String(config[field(flag.name)]), flag.name).toBe(flag.default);
      const env = `PATH_${flag.name.toUpperCase().replaceAll('-', '_')}`;
      const value = flag.example === '' ? 'true' : flag.example;
      const read = loadConfig({}, { [env]: value })[field(flag.name)];
      expect(String(read), flag.name).toBe(flag.example === '' ? 'true' : flag.example);
    }
  });
});

describe('issue 31 item 4: usage errors', () => {
  it('an unknown command names the nearest command and lists them all, on stderr, exit 2', () => {
    const cases: [string[], string, string][] = [
      [['serv'], 'serv', 'serve'],
      [['verfy', '--data-dir', 'x'], 'verfy', 'verify'],
      [['credential', 'create'], 'credential create', 'credentials create'],
      [['credentials', 'creat'], 'credentials creat', 'credentials create'],
      [['evnts', 'list'], 'evnts list', 'events list'],
      [['help', 'bakup'], 'bakup', 'backup'],
    ];
    for (const [args, named, near] of cases) {
      const run = cli(args);
      expect({ args, status: run.status, stdout: run.stdout }).toEqual({ args, status: 2, stdout: '' });
      expect(run.stderr.split('\n')[0]).toBe(`path-node: unknown command '${named}'; did you mean '${near}'?`);
      for (const command of TABLE) expect(run.stderr).toContain(`  path-node ${command.name} `);
    }
    // Nothing near: no guess, still the list.
    const far = cli(['frobnicate']);
    expect(far.status).toBe(2);
    expect(far.stderr.split('\n')[0]).toBe("path-node: unknown command 'frobnicate'");
    expect(far.stderr).toContain('  path-node members remove ');
  });

  it('a misspelt flag prints that one command\'s usage and the flag meant, exit 2, and starts nothing', () => {
    const dir = join(scratch, 'never');
    const serve = cli(['serve', '--data-dir', dir, '--prot', '8080']);
    expect(serve.status).toBe(2);
    expect(serve.stdout).toBe('');
    expect(serve.stderr.split('\n')[0]).toBe('path-node: unknown flag --prot; did you mean --port?');
    expect(synopses(serve.stderr)).toEqual([expect.stringMatching(/^ {2}path-node serve \[--port 8080\]/)]);
    expect(serve.stderr).not.toContain('credentials');
    const cases: [string[], string][] = [
      [['credentials', 'create', '--data-dir', dir, '--membr', 'm'], 'unknown flag --membr; did you mean --member?'],
      [['lookup', '--concurency', '2'], 'unknown flag --concurency; did you mean --concurrency?'],
      [['backup', '--data', dir, '--out', join(scratch, 'b')], 'unknown flag --data; did you mean --data-dir?'],
      [['events', 'list', '--data-dir', dir, '--undelivred'], 'unknown flag --undelivred; did you mean --undelivered?'],
    ];
    for (const [args, message] of cases) {
      const run = cli(args);
      expect({ args, status: run.status }).toEqual({ args, status: 2 });
      expect(run.stderr.split('\n')[0]).toBe(`path-node: ${message}`);
      const name = args.slice(0, args[0] === 'lookup' || args[0] === 'backup' ? 1 : 2).join(' ');
      expect(synopses(run.stderr)).toEqual([expect.stringContaining(`  path-node ${name} `)]);
      expect(run.stderr).toContain(`\`path-node help ${name}\``);
    }
    expect(existsSync(dir)).toBe(false);
  });

  it('a missing flag, a flag without its value or a word too many prints that command\'s usage alone, exit 2', () => {
    const dir = join(scratch, 'never-either');
    const cases: [string[], string][] = [
      [['credentials', 'revoke', '--data-dir', dir], '--key-id is required'],
      [['members', 'add', '--data-dir', dir, '--member', 'beta'], '--base-url is required'],
      [['keys', 'rotate', '--data-dir'], '--data-dir needs a value (D)'],
      [['events', 'show', '--data-dir', dir], 'events show needs EVENT_ID'],
      [['keys', 'rotate', 'now', '--data-dir', dir], "unexpected word 'now' after keys rotate"],
    ];
    for (const [args, message] of cases) {
      const run = cli(args);
      expect({ args, status: run.status }).toEqual({ args, status: 2 });
      expect(run.stderr.split('\n')[0]).toBe(`path-node: ${message}`);
      expect(synopses(run.stderr)).toHaveLength(1);
    }
    expect(existsSync(dir)).toBe(false);
    expect(existsSync(join(scratch, 'data'))).toBe(false);
  });
});
