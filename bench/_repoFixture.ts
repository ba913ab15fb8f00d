/**
 * A generated repository of the size the coding tools are built for (used by `bench/repo.ts`):
 * 50,000 tracked files in 2,000 directories (TypeScript, JavaScript and Markdown, from a seeded
 * generator), a ~9 MB `lib/typescript.js`-like file, and 20,000 more files under the ignored
 * `node_modules/` and `dist/`. Committed with fixed dates, so the same seed gives the same tree.
 *
 * @example
 * ```ts
 * const fixture = generateRepo("/tmp/bench", { seed: 7 })
 * fixture.root          // "/tmp/bench/repo"
 * fixture.rareWord      // a word that occurs in exactly `fixture.rareFiles` files
 * ```
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"

export interface RepoOptions {
  readonly seed?: number | undefined
  readonly trackedFiles?: number | undefined
  readonly directories?: number | undefined
  readonly ignoredFiles?: number | undefined
  /** Approximate size of `lib/typescript.js` in bytes. */
  readonly bigFileBytes?: number | undefined
}

export interface RepoFixture {
  readonly root: string
  readonly trackedFiles: number
  readonly ignoredFiles: number
  readonly bigFile: string
  readonly bigFileBytes: number
  /** A word in exactly `rareFiles` tracked files (one line each). */
  readonly rareWord: string
  readonly rareFiles: number
  /** A word on exactly `bigFileLines` lines of the big file, to replace everywhere. */
  readonly bigFileWord: string
  readonly bigFileLines: number
}

/** mulberry32: a small seeded PRNG. */
const prng = (seed: number) => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const WORDS = [
  "node",
  "value",
  "result",
  "options",
  "context",
  "buffer",
  "index",
  "count",
  "source",
  "target",
  "handler",
  "state",
  "token",
  "parser",
  "scope",
  "symbol",
  "type",
  "entry",
  "cache",
  "range",
  "offset",
  "length",
  "child",
  "parent",
  "visitor",
  "emitter",
  "config",
  "module",
  "request",
  "response"
]

const git = (cwd: string, args: ReadonlyArray<string>) =>
  execFileSync("git", args, {
    cwd,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    maxBuffer: 64 * 1024 * 1024,
    env: {
      ...process.env,
      GIT_CONFIG_NOSYSTEM: "1",
      GIT_AUTHOR_DATE: "2026-01-01T00:00:00Z",
      GIT_COMMITTER_DATE: "2026-01-01T00:00:00Z",
      LC_ALL: "C"
    }
  })

export const generateRepo = (parent: string, options: RepoOptions = {}): RepoFixture => {
  const seed = options.seed ?? 7
  const tracked = options.trackedFiles ?? 50_000
  const dirs = options.directories ?? 2_000
  const ignored = options.ignoredFiles ?? 20_000
  const bigBytes = options.bigFileBytes ?? 9_100_000
  const rand = prng(seed)
  const pick = <A>(xs: ReadonlyArray<A>): A => xs[Math.floor(rand() * xs.length)]!
  const ident = () => `${pick(WORDS)}${pick(WORDS).replace(/^./, (c) => c.toUpperCase())}`
  const root = path.join(parent, "repo")
  fs.mkdirSync(root, { recursive: true })

  const tsFile = (i: number) => {
    const lines = [`import { ${ident()} } from "../shared/${pick(WORDS)}.js"`, ""]
    const fns = 2 + Math.floor(rand() * 5)
    for (let f = 0; f < fns; f++) {
      const name = `${ident()}${i}_${f}`
      lines.push(`/** Computes the ${pick(WORDS)} of a ${pick(WORDS)} for the ${pick(WORDS)}. */`)
      lines.push(`export function ${name}(${pick(WORDS)}: number, ${pick(WORDS)}: string): number {`)
      const body = 2 + Math.floor(rand() * 6)
      for (let b = 0; b < body; b++) lines.push(`  const ${pick(WORDS)}${b} = ${pick(WORDS)}.length + ${b}`)
      lines.push(`  return ${pick(WORDS)}0 * ${f + 1}`, "}", "")
    }
    return lines.join("\n")
  }
  const jsFile = (i: number) => {
    const lines = ['"use strict"', `const ${ident()} = require("./${pick(WORDS)}")`, ""]
    const fns = 2 + Math.floor(rand() * 4)
    for (let f = 0; f < fns; f++) {
      lines.push(`function ${ident()}${i}_${f}(${pick(WORDS)}, ${pick(WORDS)}) {`)
      const body = 2 + Math.floor(rand() * 5)
      for (let b = 0; b < body; b++) lines.push(`  var ${pick(WORDS)}${b} = ${pick(WORDS)}[${b}];`)
      lines.push(`  return ${pick(WORDS)}0;`, "}", "")
    }
    lines.push(`module.exports = { ${ident()} }`, "")
    return lines.join("\n")
  }
  const mdFile = (i: number) => {
    const lines = [`# ${ident()} ${i}`, ""]
    const paras = 2 + Math.floor(rand() * 4)
    for (let p = 0; p < paras; p++) {
      const words = Array.from({ length: 30 + Math.floor(rand() * 40) }, () => pick(WORDS))
      lines.push(words.join(" "), "")
    }
    return lines.join("\n")
  }

  const dirNames = Array.from({ length: dirs }, (_, d) => {
    const pkg = `p${String(d % 20).padStart(2, "0")}`
    return `packages/${pkg}/src/m${String(Math.floor(d / 20)).padStart(3, "0")}`
  })
  for (const d of dirNames) fs.mkdirSync(path.join(root, d), { recursive: true })
  const rareWord = "zyzzyvaMarker"
  const rareAt = new Set([Math.floor(tracked * 0.13), Math.floor(tracked * 0.51), Math.floor(tracked * 0.88)])
  let written = 0
  for (let i = 0; written < tracked - 3; i++) {
    const dir = dirNames[i % dirs]!
    const kind = rand()
    const [name, body] =
      kind < 0.7 ? [`f${i}.ts`, tsFile(i)] : kind < 0.9 ? [`f${i}.js`, jsFile(i)] : [`f${i}.md`, mdFile(i)]
    const text = rareAt.has(i) ? `${body}// ${rareWord}: found it\n` : body
    fs.writeFileSync(path.join(root, dir, name), text)
    written++
  }

  // the big file: ~9 MB of typescript.js-like code; `bigFileWord` on a known number of lines
  const bigFileWord = "visitEachChildOfNode"
  const big: Array<string> = ["var ts;", "(function (ts) {"]
  let size = 20
  let bigLines = 0
  let n = 0
  while (size < bigBytes) {
    const name = `${ident()}${n++}`
    const chunk = [
      `    function ${name}(node, ${pick(WORDS)}) {`,
      `        var ${pick(WORDS)} = node.${pick(WORDS)};`,
      n % 10 === 0
        ? `        return ts.${bigFileWord}(node, ${pick(WORDS)}, context);`
        : `        return ts.${pick(WORDS)}(node, ${pick(WORDS)});`,
      "    }",
      `    ts.${name} = ${name};`
    ]
    if (n % 10 === 0) bigLines++
    for (const l of chunk) size += l.length + 1
    big.push(...chunk)
  }
  big.push("})(ts || (ts = {}));", "")
  const bigFile = "lib/typescript.js"
  fs.mkdirSync(path.join(root, "lib"), { recursive: true })
  fs.writeFileSync(path.join(root, bigFile), big.join("\n"))

  fs.writeFileSync(path.join(root, ".gitignore"), "node_modules/\ndist/\n*.log\n")
  fs.writeFileSync(path.join(root, "README.md"), "# bench repository\n\nGenerated by bench/_repoFixture.ts.\n")
  // the ignored part: node_modules/ (three quarters) and dist/
  const made = new Set<string>()
  for (let i = 0; i < ignored; i++) {
    const inModules = i % 4 !== 3
    const dir = inModules
      ? `node_modules/pkg${String(i % 300).padStart(3, "0")}/lib`
      : `dist/m${String(i % 100).padStart(3, "0")}`
    if (!made.has(dir)) {
      fs.mkdirSync(path.join(root, dir), { recursive: true })
      made.add(dir)
    }
    // the rare word sits in ignored files too: a search that reads them finds more
    fs.writeFileSync(path.join(root, dir, `g${i}.js`), `${jsFile(i)}${i % 1000 === 0 ? `// ${rareWord}\n` : ""}`)
  }

  git(root, ["init", "-q", "-b", "main"])
  git(root, ["config", "user.name", "Bench"])
  git(root, ["config", "user.email", "bench@example.invalid"])
  git(root, ["add", "-A"])
  git(root, ["commit", "-q", "-m", "generated"])
  return {
    root,
    trackedFiles: tracked,
    ignoredFiles: ignored,
    bigFile,
    bigFileBytes: size,
    rareWord,
    rareFiles: rareAt.size,
    bigFileWord,
    bigFileLines: bigLines
  }
}
