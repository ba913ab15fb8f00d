/**
 * The coding tools on a repository of the size they are built for: a generated git repository of
 * 50,000 tracked files in 2,000 directories, a ~9 MB `lib/typescript.js`, and 20,000 more files
 * under the ignored `node_modules/` and `dist/` (`bench/_repoFixture.ts`, seeded and committed).
 *
 * Each tool call goes through the real tool handler (`CodingTools.make`, a `WorkspaceNode`
 * workspace) and is timed beside the same question asked of ripgrep (the one `@musekit/node`
 * ships), git, or `sed -i` + `diff -u`, in the same run: medians of `BENCH_REPO_RUNS` (3) runs,
 * the two sides alternating. Then each result is put through `Tools.fitResult` with the budget of
 * a 200k-token and of a 32k-token model and counted with the compaction plugin's tokenizer: no
 * result may exceed its budget.
 *
 * ```sh
 * pnpm bench repo                                  # generates the repository in a temp dir (~1 min)
 * BENCH_REPO_DIR=/tmp/repo-bench pnpm bench repo   # keeps it there and reuses it next time
 * ```
 * Figures also go to `bench/out/repo.json`.
 */
import { execFileSync, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Tools } from "@musekit/core"
import { Effect } from "effect"
import { CodingTools, WorkspaceNode } from "../packages/node/src/index.js"
import { findRipgrep } from "../packages/node/src/internal/ripgrep.js"
import { Tokens } from "../plugins/compaction/src/index.js"
import { generateRepo, type RepoFixture } from "./_repoFixture.js"
import { fmtMs, median, printTable, writeFigures } from "./report.js"

export const description =
  "list_files, grep, read_file and edit_file on a generated 50k-file git repository beside rg, git and sed + diff"

const RUNS = Number(process.env.BENCH_REPO_RUNS ?? 3)

const fixtureFor = (parent: string): RepoFixture => {
  const saved = path.join(parent, "fixture.json")
  if (fs.existsSync(saved) && fs.existsSync(path.join(parent, "repo", ".git"))) {
    const fixture = JSON.parse(fs.readFileSync(saved, "utf8")) as RepoFixture
    // a kept repository: put the big file back as committed
    execFileSync("git", ["checkout", "-q", "--", fixture.bigFile], { cwd: fixture.root })
    return fixture
  }
  fs.rmSync(path.join(parent, "repo"), { recursive: true, force: true })
  const fixture = generateRepo(parent)
  fs.writeFileSync(saved, JSON.stringify(fixture))
  return fixture
}

type Call = { readonly tool: string; readonly params: Record<string, unknown> }

interface Case {
  readonly name: string
  /** Tool set: `rg` (ripgrep engine) or `js`. */
  readonly engine?: "rg" | "js"
  readonly call: Call
  /** Shell command for the baseline, run with `sh -c` in the repository; `$RG` is ripgrep. */
  readonly baseline?: string
  readonly baselineLabel?: string
  /** Untimed preparation before each tool run and each baseline run. */
  readonly reset?: () => void
}

interface Row {
  readonly name: string
  readonly tool: number
  readonly baseline: number | undefined
  readonly baselineLabel: string
  readonly result: string
}

const shell = (cwd: string, command: string, env: NodeJS.ProcessEnv) => {
  const t0 = performance.now()
  const r = spawnSync("sh", ["-c", command], { cwd, env, stdio: ["ignore", "ignore", "pipe"], maxBuffer: 1 << 30 })
  const ms = performance.now() - t0
  if (r.status !== 0 && r.status !== 1) throw new Error(`baseline failed (${r.status}): ${command}\n${r.stderr}`)
  return ms
}

const rssMiB = () => Math.round(process.memoryUsage().rss / 2 ** 20)

export const run = async (): Promise<void> => {
  const keep = process.env.BENCH_REPO_DIR
  const parent = keep ?? fs.mkdtempSync(path.join(os.tmpdir(), "muse-bench-repo-"))
  fs.mkdirSync(parent, { recursive: true })
  try {
    const t0 = performance.now()
    const fixture = fixtureFor(parent)
    const root = fixture.root
    const genMs = performance.now() - t0
    const rg = await findRipgrep()
    if (!rg) throw new Error("no ripgrep: install @musekit/node's dependencies (pnpm install)")
    const rgVersion = execFileSync(rg, ["--version"], { encoding: "utf8" }).split("\n")[0]
    const env = { ...process.env, RG: rg, LC_ALL: "C" }
    const load = () =>
      os
        .loadavg()
        .map((l) => l.toFixed(1))
        .join(" ")
    process.stdout.write(
      `repository: ${fixture.trackedFiles.toLocaleString("en-US")} tracked files + ${fixture.ignoredFiles.toLocaleString("en-US")} ignored, ` +
        `${(fixture.bigFileBytes / 1e6).toFixed(1)} MB ${fixture.bigFile}; ready in ${fmtMs(genMs)}; ${rgVersion}; ` +
        `${execFileSync("git", ["--version"], { encoding: "utf8" }).trim()}; median of ${RUNS} runs; load average ${load()}\n`
    )

    const workspace = await Effect.runPromise(WorkspaceNode.make(root))
    const sets = {
      rg: CodingTools.make({ grepEngine: "ripgrep" }),
      js: CodingTools.make({ grepEngine: "js" })
    }
    const ctx: Tools.CallContext = { agent: "main", callId: "bench", workspace, progress: () => Effect.void }
    const callTool = (engine: "rg" | "js", call: Call): Promise<unknown> => {
      const def = sets[engine].find((d) => d.name === call.tool)!
      return Effect.runPromise(
        Effect.flatMap(Tools.decodeParams(def, call.params), (p) => def.handler(p, ctx)).pipe(
          Effect.catchAll((e) => Effect.succeed({ error: e.message }))
        )
      )
    }

    const big = path.join(root, fixture.bigFile)
    const original = fs.readFileSync(big)
    const scratch = path.join(parent, "sed-copy.js")
    const restoreBig = () => fs.writeFileSync(big, original)
    const word = fixture.bigFileWord
    const cases: Array<Case> = [
      {
        name: "list_files root, default limit (1,000)",
        call: { tool: "list_files", params: {} },
        baseline: `"$RG" --files --sort path | head -1000`
      },
      {
        name: "list_files **/*.md",
        call: { tool: "list_files", params: { pattern: "**/*.md" } },
        baseline: `"$RG" --files --sort path -g '*.md' | head -1000`
      },
      {
        name: "list_files packages/p07/**/*.ts",
        call: { tool: "list_files", params: { pattern: "packages/p07/**/*.ts" } },
        baseline: `"$RG" --files --sort path -g 'packages/p07/**/*.ts' | head -1000`
      },
      {
        name: `grep ${fixture.rareWord} (full scan, 3 files), ripgrep`,
        call: { tool: "grep", params: { pattern: fixture.rareWord } },
        baseline: `"$RG" -n ${fixture.rareWord}`
      },
      {
        name: `grep ${fixture.rareWord}, JS engine`,
        engine: "js",
        call: { tool: "grep", params: { pattern: fixture.rareWord } },
        baseline: `"$RG" -n ${fixture.rareWord}`
      },
      {
        name: "grep return, glob packages/p07/**/*.ts",
        call: { tool: "grep", params: { pattern: "return", glob: "packages/p07/**/*.ts" } },
        baseline: `"$RG" -n return -g 'packages/p07/**/*.ts'`
      },
      {
        name: "grep return, glob *.md (no match)",
        call: { tool: "grep", params: { pattern: "return", glob: "*.md" } },
        baseline: `"$RG" -n return -g '*.md'`
      },
      {
        name: "grep return (200 of all, with totals)",
        call: { tool: "grep", params: { pattern: "return" } },
        baseline: `"$RG" --count return`,
        baselineLabel: "rg --count (the totals)"
      },
      {
        name: "grep return (200 of all, with totals)",
        call: { tool: "grep", params: { pattern: "return" } },
        baseline: `"$RG" -n return | head -200`,
        baselineLabel: "rg -n | head -200 (no totals)"
      },
      {
        name: `edit_file replace_all ${fixture.bigFileWord} (${fixture.bigFileLines.toLocaleString("en-US")} lines, 9 MB)`,
        call: {
          tool: "edit_file",
          params: { path: fixture.bigFile, edits: [{ old_text: word, new_text: `${word}2`, replace_all: true }] }
        },
        baseline: `cp "${big}" "${scratch}" && sed -i 's/${word}/${word}2/g' "${scratch}" && diff -u "${big}" "${scratch}" > /dev/null`,
        baselineLabel: "cp + sed -i + diff -u",
        reset: restoreBig
      },
      {
        name: "read_file lib/typescript.js (default cap)",
        call: { tool: "read_file", params: { path: fixture.bigFile } }
      },
      {
        name: "grep return, limit 5000 (the most)",
        call: { tool: "grep", params: { pattern: "return", limit: 5000 } }
      },
      {
        name: "list_files root, limit 10000 (the most)",
        call: { tool: "list_files", params: { limit: 10_000 } }
      }
    ]

    // warm the page cache and the tools once
    shell(root, `"$RG" -c zzzz-warm > /dev/null`, env)
    await callTool("rg", { tool: "list_files", params: {} })

    const rows: Array<Row> = []
    const budgets = { "200k": Tools.resultBudget(200_000), "32k": Tools.resultBudget(32_768) }
    const fitRows: Array<Array<string | number>> = []
    let rssPeak = rssMiB()
    for (const c of cases) {
      const toolMs: Array<number> = []
      const baseMs: Array<number> = []
      let last: unknown
      for (let r = 0; r < RUNS; r++) {
        const order = r % 2 === 0 ? ["tool", "base"] : ["base", "tool"]
        for (const side of order) {
          c.reset?.()
          if (side === "tool") {
            const t = performance.now()
            last = await callTool(c.engine ?? "rg", c.call)
            toolMs.push(performance.now() - t)
            rssPeak = Math.max(rssPeak, rssMiB())
          } else if (c.baseline) baseMs.push(shell(root, c.baseline, env))
        }
      }
      c.reset?.()
      const summary = summarize(last)
      rows.push({
        name: c.name,
        tool: median(toolMs),
        baseline: c.baseline ? median(baseMs) : undefined,
        baselineLabel: c.baselineLabel ?? c.baseline?.replaceAll('"$RG"', "rg").replace(/"[^"]*"/g, "F") ?? "",
        result: summary
      })
      process.stderr.write(`  ${c.name}: ${fmtMs(median(toolMs))}${c.baseline ? ` vs ${fmtMs(median(baseMs))}` : ""}\n`)
      const def = sets[c.engine ?? "rg"].find((d) => d.name === c.call.tool)!
      const raw = Tokens.countText(Tokens.outputText(last))
      const row: Array<string | number> = [c.name, raw]
      for (const b of Object.values(budgets)) {
        const seen = Tokens.countText(Tokens.outputText(Tools.fitResult(def, last, b)))
        row.push(
          `${seen.toLocaleString("en-US")} / ${b.tokens.toLocaleString("en-US")}${seen > b.tokens ? " OVER" : ""}`
        )
      }
      fitRows.push(row)
    }

    printTable(
      `Tool calls vs the same question to rg / sed + diff (median of ${RUNS}; load average now ${load()})`,
      ["call", "muse", "baseline", "baseline ms", "ratio", "result"],
      rows.map((r) => [
        r.name,
        fmtMs(r.tool),
        r.baselineLabel,
        r.baseline === undefined ? "" : fmtMs(r.baseline),
        r.baseline === undefined ? "" : `${(r.tool / r.baseline).toFixed(2)}x`,
        r.result
      ])
    )
    printTable(
      "What the model sees (tokens of the result, o200k; fitted to the budget of one result)",
      ["call", "whole result", "200k window", "32k window"],
      fitRows
    )
    process.stdout.write(`\npeak RSS of the bench process: ${rssPeak} MiB\n`)
    const file = writeFigures("repo", {
      runs: RUNS,
      load: os.loadavg(),
      ripgrep: rgVersion,
      rows,
      tokens: fitRows,
      rssPeakMiB: rssPeak
    })
    process.stdout.write(`figures: ${file}\n`)
  } finally {
    if (!keep) fs.rmSync(parent, { recursive: true, force: true })
  }
}

/** One line about a tool result. */
const summarize = (r: any): string => {
  if (r?.error) return `error: ${String(r.error).slice(0, 80)}`
  if (Array.isArray(r?.files)) return `${r.files.length} files${r.truncated ? ", more exist" : ""}`
  if (Array.isArray(r?.matches))
    return `${r.matches.length} shown of ${r.total.toLocaleString("en-US")} in ${r.files.toLocaleString("en-US")} files`
  if (typeof r?.diff === "string") return `+${r.added} -${r.removed}, diff ${Math.round(r.diff.length / 1024)} KiB`
  if (typeof r?.content === "string") return `lines ${r.start_line}-${r.end_line} of ${r.total_lines}`
  return JSON.stringify(r).slice(0, 60)
}
