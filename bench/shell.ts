/**
 * The cost of parsing shell commands for approval rules.
 *
 * - Loading the parser, in a fresh process each time (median of N): `node -e 0`, and a process that
 *   imports web-tree-sitter, loads the bash grammar and parses one command (split into its steps).
 *   What remains of the whole process time is its exit: V8 finishes optimizing the grammar's code
 *   in the background before a process that loaded it can end.
 * - Deciding, in this process once loaded: `Approvals.check` of a `run_shell` call with the parser
 *   (analysis, wrappers, argv rules) against the old decision (a glob over the command text), over
 *   the same commands, each distinct so no analysis is served from the cache.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { Approvals } from "@musekit/core"
import { ShellParser } from "@musekit/node"
import { Effect } from "effect"
import { fmtMs, median, printTable, writeFigures } from "./report.js"

export const description = "shell parser load time in a fresh process, and the cost of a parsed approval decision"

const N = 7
const nodeDir = fileURLToPath(new URL("../packages/node/", import.meta.url))

const loader = `
import { createRequire } from "node:module"
const t0 = performance.now()
const require = createRequire(${JSON.stringify(path.join(nodeDir, "package.json"))})
const { Parser, Language } = await import(require.resolve("web-tree-sitter"))
const t1 = performance.now()
await Parser.init()
const t2 = performance.now()
const bash = await Language.load(require.resolve("tree-sitter-bash/tree-sitter-bash.wasm"))
const parser = new Parser()
parser.setLanguage(bash)
const t3 = performance.now()
parser.parse("npm test && git status").delete()
const t4 = performance.now()
parser.parse("find . -name '*.ts' -exec grep -n x {} + | head").delete()
const t5 = performance.now()
console.log(JSON.stringify({ import: t1 - t0, init: t2 - t1, grammar: t3 - t2, firstParse: t4 - t3, secondParse: t5 - t4 }))
`

const timed = (args: ReadonlyArray<string>) => {
  const t = performance.now()
  const out = execFileSync(process.execPath, args, { encoding: "utf8" })
  return { ms: performance.now() - t, out }
}

export const run = async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "muse-bench-shell-"))
  const script = path.join(dir, "load.mjs")
  fs.writeFileSync(script, loader)
  const bare: Array<number> = []
  const whole: Array<number> = []
  const steps: Array<Record<string, number>> = []
  for (let i = 0; i < N; i++) {
    bare.push(timed(["-e", "0"]).ms)
    const r = timed([script])
    whole.push(r.ms)
    steps.push(JSON.parse(r.out))
  }
  const step = (k: string) => median(steps.map((s) => s[k]!))
  const loadMs = step("import") + step("init") + step("grammar") + step("firstParse")
  printTable(
    `Loading the parser (fresh process, median of ${N})`,
    ["step", "time"],
    [
      ["node -e 0 (whole process)", fmtMs(median(bare))],
      ["load + first parse (whole process)", fmtMs(median(whole))],
      ["  import web-tree-sitter", fmtMs(step("import"))],
      ["  Parser.init (runtime .wasm)", fmtMs(step("init"))],
      ["  bash grammar .wasm", fmtMs(step("grammar"))],
      ["  first parse (compiles the grammar's code)", fmtMs(step("firstParse"))],
      ["  second parse", fmtMs(step("secondParse"))],
      ["process exit after loading", fmtMs(Math.max(0, median(whole) - median(bare) - loadMs))]
    ]
  )

  // decisions, in this process
  await Effect.runPromise(ShellParser.parser.parse("true"))
  const commands = Array.from({ length: 2000 }, (_, i) =>
    i % 4 === 0
      ? `npm test -- --grep case${i}`
      : i % 4 === 1
        ? `npm test && echo done${i} | tee /dev/null`
        : i % 4 === 2
          ? `bash -c 'npm test -- ${i}; git status'`
          : `find . -name '*${i}.ts' -exec grep -n TODO {} +`
  )
  const rules: ReadonlyArray<Approvals.Rule> = [
    { tool: "run_shell", pattern: "npm test*", action: "allow", scope: "session" },
    { tool: "run_shell", pattern: "rm*", action: "deny", scope: "session" }
  ]
  const service = await Effect.runPromise(Approvals.make({ mode: "auto-edit", rules, shell: ShellParser.parser }))
  const request = (c: string): Approvals.Request => ({
    agent: "main",
    tool: "run_shell",
    effect: "exec",
    summary: c,
    command: c
  })
  let t = performance.now()
  for (const c of commands) await Effect.runPromise(service.check(request(c)))
  const parsedUs = ((performance.now() - t) * 1000) / commands.length
  t = performance.now()
  let n = 0
  for (const c of commands) {
    // the decision before parsing: deny globs, then allow globs, over the text
    if (!rules.some((r) => r.action === "deny" && Approvals.globMatch(r.pattern!, c))) {
      if (rules.some((r) => r.action === "allow" && Approvals.globMatch(r.pattern!, c))) n++
    }
  }
  const globUs = ((performance.now() - t) * 1000) / commands.length
  printTable(
    `Deciding a run_shell call (${commands.length} distinct commands)`,
    ["decision", "per call"],
    [
      ["glob over the text (before)", `${globUs.toFixed(1)} µs`],
      ["parsed: analysis + argv rules", `${parsedUs.toFixed(1)} µs`],
      ["ratio", `${(parsedUs / globUs).toFixed(0)}×`]
    ]
  )
  void n
  writeFigures("shell", {
    nodeBareMs: median(bare),
    loadWholeMs: median(whole),
    steps: {
      import: step("import"),
      init: step("init"),
      grammar: step("grammar"),
      firstParse: step("firstParse"),
      secondParse: step("secondParse")
    },
    loadMs,
    decisionParsedUs: parsedUs,
    decisionGlobUs: globUs
  })
  fs.rmSync(dir, { recursive: true, force: true })
}
