// The habits a machine can check (STYLE.md 5, 9, 14), run by `npm test` before the tests:
// no function in src/ over FUNCTION_LINES_MAX lines (test files aside), no line over LINE_COLUMNS_MAX columns, and
// no limit written inline outside src/config.ts (a top-level numeric constant named like a limit:
// *_MAX, *_MIN, *_MS, *_BYTES, *_SECONDS, *_DEFAULT, *_LIMIT). A constant that is a fact of a
// format rather than a setting says so on its line: `// tidy: format (why)`. And the storage
// boundary (issue 29): src/log knows bytes, positions and checksums, not the domain, so its
// modules import nothing of src/ but each other and src/config.ts (BOUNDARIES); and only the
// deployment (src/deployment.ts, src/cluster, the PostgreSQL store, the settings) names a lease
// or a fence: the runtime speaks of partitions held, whatever keeps them (COORDINATION_WORDS).
// And routes parse, authenticate and map (issue 29, vertical slices): a route module of an
// aggregate reads no table itself, so what a page or a check holds stays in its domain (ROUTES).
// Usage: node dist/scripts/tidy.js [root]   (exits 1 and lists every finding when there is one)
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

const FUNCTION_LINES_MAX = 70;
const LINE_COLUMNS_MAX = 100;
const LIMIT_NAME = /^[A-Z][A-Z0-9_]*_(MAX|MIN|MS|BYTES|SECONDS|DEFAULT|LIMIT)$/;
const EXEMPT = /\/\/ tidy: format\b/;
const CONFIG_FILE = join('src', 'config.ts');
const TEST_FILE = /\.(test|contract)\.ts$/;

/** Words of cluster coordination, and where alone they may be written (tests aside). */
const COORDINATION_WORDS = /\b(leas(e|es|ed|ing)|fenc(e|es|ed|ing))\b/i;
const COORDINATION_HOMES = [
  join('src', 'cluster') + '/',
  join('src', 'log', 'postgres-'),
  join('src', 'deployment.ts'),
  CONFIG_FILE,
];

/** What the modules of a folder of src/ (tests aside) may import from src/: nothing else. */
const BOUNDARIES: readonly { folder: string; may: readonly string[] }[] = [
  { folder: join('src', 'log'), may: [join('src', 'log'), CONFIG_FILE] },
];

/**
 * The route modules of the aggregates (`src/domain/<aggregate>/routes.ts`, `*-routes.ts`): they
 * import nothing of the log or of the rows and their codecs, and name no log, range or scan of
 * the services; a table is read behind a domain function or the services (publicView, ownerOf).
 */
const ROUTES = {
  file: /^src\/domain\/(.+\/)?([^/]+-)?routes\.ts$/,
  unreachable: [join('src', 'log'), join('src', 'reads')],
  /** An aggregate's own row codecs (`<name>-rows.ts` in its folder): its domain reads them. */
  codecs: /-rows\.ts$/,
  names: new Set(['log', 'loadRange', 'scan']),
};

/**
 * The front end's folders (the threads that serve HTTP and what they call): they reach the store
 * through the Reads port, never the Log's records and snapshots (issue 29).
 */
const FRONT = {
  folders: ['http', 'network', 'events', 'directory', 'domain', 'pages'].map((f) => join('src', f)),
  log: join('src', 'log', 'log.ts'),
};

export interface Finding {
  file: string;
  line: number;
  rule:
    | 'function-length'
    | 'line-width'
    | 'inline-limit'
    | 'boundary'
    | 'coordination'
    | 'routes'
    | 'reads';
  message: string;
}

/** The trees tidy reads: the node's, and the client's package (once under src/client). */
const SOURCE_ROOTS = ['src', join('packages', 'client', 'src')];

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  if (!existsSync(dir)) return out;
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...sourceFiles(path));
    else if (name.endsWith('.ts')) out.push(path);
  }
  return out;
}

function functionName(node: ts.Node, source: ts.SourceFile): string {
  const named = node as ts.Node & { name?: ts.Node };
  if (named.name !== undefined) return named.name.getText(source);
  const parent = node.parent;
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent))
    return parent.name.getText(source);
  return '(anonymous)';
}

/** The modules of src/ a module imports (static, dynamic, re-exports), each with its node. */
function importsOf(
  root: string,
  file: string,
  source: ts.SourceFile,
): { target: string; node: ts.Node }[] {
  const found: { target: string; node: ts.Node }[] = [];
  const visit = (node: ts.Node): void => {
    const named =
      (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
      node.moduleSpecifier !== undefined &&
      ts.isStringLiteral(node.moduleSpecifier)
        ? node.moduleSpecifier
        : ts.isCallExpression(node) &&
            node.expression.kind === ts.SyntaxKind.ImportKeyword &&
            node.arguments[0] !== undefined &&
            ts.isStringLiteral(node.arguments[0])
          ? node.arguments[0]
          : null;
    if (named?.text.startsWith('.')) {
      const target = relative(root, resolve(root, dirname(file), named.text));
      found.push({ target: target.replace(/\.js$/, '.ts'), node });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

const lineOf = (source: ts.SourceFile, node: ts.Node) =>
  source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;

/** Imports of a module outside what its folder may import. */
function crossings(root: string, file: string, source: ts.SourceFile): Finding[] {
  const bound = BOUNDARIES.find((b) => file.startsWith(b.folder + '/'));
  if (bound === undefined || TEST_FILE.test(file)) return [];
  return importsOf(root, file, source)
    .filter(({ target }) => !bound.may.some((m) => target === m || target.startsWith(m + '/')))
    .map(({ target, node }) => ({
      file,
      line: lineOf(source, node),
      rule: 'boundary' as const,
      message: `${bound.folder} imports only from ${bound.may.join(', ')}: not ${target}`,
    }));
}

/** A front-end module that takes the Log port (records, snapshots) rather than Reads. */
function frontLog(root: string, file: string, source: ts.SourceFile): Finding[] {
  if (!FRONT.folders.some((f) => file.startsWith(f + '/')) || TEST_FILE.test(file)) return [];
  return importsOf(root, file, source)
    .filter(({ target, node }) => target === FRONT.log && namesImported(node).includes('Log'))
    .map(({ node }) => ({
      file,
      line: lineOf(source, node),
      rule: 'reads' as const,
      message: 'the front end reads the store through Reads, not the Log (records, snapshots)',
    }));
}

/** The names an import declaration binds (`import { A, type B as C }`: A, B). */
function namesImported(node: ts.Node): string[] {
  if (!ts.isImportDeclaration(node)) return [];
  const bindings = node.importClause?.namedBindings;
  if (bindings === undefined || !ts.isNamedImports(bindings)) return [];
  return bindings.elements.map((e) => (e.propertyName ?? e.name).text);
}

/** What a route module reaches of the tables: imports of the log or the rows, a log named. */
function routeReads(root: string, file: string, source: ts.SourceFile): Finding[] {
  if (!ROUTES.file.test(file) || TEST_FILE.test(file)) return [];
  const findings: Finding[] = [];
  for (const { target, node } of importsOf(root, file, source)) {
    const folder =
      ROUTES.unreachable.find((f) => target.startsWith(f + '/')) ??
      (ROUTES.codecs.test(target) ? 'the row codecs' : undefined);
    if (folder === undefined) continue;
    const message = `a route reads no table: it imports nothing of ${folder} (${target})`;
    findings.push({ file, line: lineOf(source, node), rule: 'routes', message });
  }
  const visit = (node: ts.Node): void => {
    const name =
      ts.isPropertyAccessExpression(node) || ts.isBindingElement(node)
        ? (ts.isBindingElement(node) ? (node.propertyName ?? node.name) : node.name).getText(source)
        : null;
    if (name !== null && ROUTES.names.has(name)) {
      const message = `a route reads no table: no \`${name}\` here (its domain reads it)`;
      findings.push({ file, line: lineOf(source, node), rule: 'routes', message });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return findings;
}

/** Functions, methods and arrow functions longer than the limit (their whole span). */
function longFunctions(file: string, source: ts.SourceFile): Finding[] {
  const found: Finding[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isFunctionLike(node) && (node as ts.FunctionLikeDeclaration).body !== undefined) {
      const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const end = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      const lines = end - start + 1;
      if (lines > FUNCTION_LINES_MAX) {
        found.push({
          file,
          line: start + 1,
          rule: 'function-length',
          message: `${functionName(node, source)} is ${lines} lines (at most ${FUNCTION_LINES_MAX})`,
        });
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** Top-level numeric constants named like limits, outside config.ts. */
function inlineLimits(file: string, source: ts.SourceFile, lines: readonly string[]): Finding[] {
  const found: Finding[] = [];
  for (const statement of source.statements) {
    if (!ts.isVariableStatement(statement)) continue;
    for (const declaration of statement.declarationList.declarations) {
      const name = declaration.name.getText(source);
      const init = declaration.initializer;
      if (!LIMIT_NAME.test(name) || init === undefined || !isNumeric(init)) continue;
      const line = source.getLineAndCharacterOfPosition(declaration.getStart(source)).line;
      if (EXEMPT.test(lines[line] ?? '')) continue;
      found.push({
        file,
        line: line + 1,
        rule: 'inline-limit',
        message: `${name} is a limit: give it a home in ${CONFIG_FILE}`,
      });
    }
  }
  return found;
}

function isNumeric(node: ts.Expression): boolean {
  if (ts.isNumericLiteral(node)) return true;
  if (ts.isPrefixUnaryExpression(node)) return isNumeric(node.operand);
  if (ts.isParenthesizedExpression(node)) return isNumeric(node.expression);
  if (ts.isBinaryExpression(node)) return isNumeric(node.left) && isNumeric(node.right);
  return false;
}

export function tidy(root: string): Finding[] {
  const findings: Finding[] = [];
  for (const path of SOURCE_ROOTS.flatMap((dir) => sourceFiles(join(root, dir)))) {
    const file = relative(root, path);
    const text = readFileSync(path, 'utf8');
    const lines = text.split('\n');
    const coordinationHome =
      TEST_FILE.test(file) || COORDINATION_HOMES.some((home) => file.startsWith(home));
    lines.forEach((line, i) => {
      const word = coordinationHome ? null : COORDINATION_WORDS.exec(line);
      if (word !== null) {
        findings.push({
          file,
          line: i + 1,
          rule: 'coordination',
          message: `'${word[0]}' is the deployment's word (src/deployment.ts, src/cluster)`,
        });
      }
      if (line.length > LINE_COLUMNS_MAX) {
        findings.push({
          file,
          line: i + 1,
          rule: 'line-width',
          message: `${line.length} columns (at most ${LINE_COLUMNS_MAX})`,
        });
      }
    });
    const source = ts.createSourceFile(path, text, ts.ScriptTarget.ES2022, true);
    // A test file's describe blocks are lists of cases, not functions to read at once.
    if (!TEST_FILE.test(file)) findings.push(...longFunctions(file, source));
    if (file !== CONFIG_FILE) findings.push(...inlineLimits(file, source, lines));
    findings.push(...crossings(root, file, source));
    findings.push(...routeReads(root, file, source));
    findings.push(...frontLog(root, file, source));
  }
  return findings;
}

function main(): void {
  const root = process.argv[2] ?? process.cwd();
  const findings = tidy(root);
  for (const f of findings) process.stderr.write(`${f.file}:${f.line}: ${f.rule}: ${f.message}\n`);
  if (findings.length > 0) {
    process.stderr.write(`tidy: ${findings.length} finding(s)\n`);
    process.exit(1);
  }
  process.stdout.write('tidy: src/ and packages/client/src/ keep the checked habits\n');
}

if (process.argv[1] !== undefined && import.meta.url === new URL(`file://${process.argv[1]}`).href)
  main();
