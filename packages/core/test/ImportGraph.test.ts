/**
 * core's modules import each other without loops, and the contracts a plugin author implements
 * stay beneath the machinery that runs them. Type-only imports and re-exports count: a loop of
 * types is still a loop for readers, for declaration output and for the next value import.
 */
import { readdirSync, readFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "@effect/vitest"
import ts from "typescript"

const src = join(dirname(fileURLToPath(import.meta.url)), "..", "src")

/** Module name → the core modules it imports or re-exports from (comments and strings ignored). */
const importGraph = (dir: string): Map<string, ReadonlyArray<string>> => {
  const graph = new Map<string, ReadonlyArray<string>>()
  const modules = readdirSync(dir, { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith(".ts"))
  for (const file of modules) {
    const name = file.replace(/\\/g, "/").replace(/\.ts$/, "")
    const { importedFiles } = ts.preProcessFile(readFileSync(join(dir, file), "utf8"), true, true)
    const deps = importedFiles
      .map((f) => f.fileName)
      .filter((f) => f.startsWith("."))
      .map((f) => join(dirname(name), f).replace(/\\/g, "/").replace(/\.js$/, ""))
    graph.set(name, [...new Set(deps)])
  }
  return graph
}

/** Every loop (a strongly connected component of more than one module, or a module importing itself). */
const loops = (graph: ReadonlyMap<string, ReadonlyArray<string>>): Array<Array<string>> => {
  let next = 0
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: Array<string> = []
  const onStack = new Set<string>()
  const out: Array<Array<string>> = []
  const visit = (v: string) => {
    index.set(v, next)
    low.set(v, next++)
    stack.push(v)
    onStack.add(v)
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue
      if (!index.has(w)) {
        visit(w)
        low.set(v, Math.min(low.get(v)!, low.get(w)!))
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!))
    }
    if (low.get(v) === index.get(v)) {
      const component: Array<string> = []
      let w: string
      do {
        w = stack.pop()!
        onStack.delete(w)
        component.push(w)
      } while (w !== v)
      if (component.length > 1 || (graph.get(v) ?? []).includes(v)) out.push(component.sort())
    }
  }
  for (const v of graph.keys()) if (!index.has(v)) visit(v)
  return out
}

/** Everything `from` reaches through its imports. */
const reaches = (graph: ReadonlyMap<string, ReadonlyArray<string>>, from: string): Set<string> => {
  const seen = new Set<string>()
  const todo = [...(graph.get(from) ?? [])]
  while (todo.length > 0) {
    const m = todo.pop()!
    if (seen.has(m)) continue
    seen.add(m)
    todo.push(...(graph.get(m) ?? []))
  }
  return seen
}

describe("core's import graph", () => {
  const graph = importGraph(src)

  it("reads the modules and their imports, type-only ones and re-exports included", () => {
    expect(graph.get("Agent")).toContain("Plugin")
    expect(graph.get("Plugin")).toContain("Contract")
    // `import type * as Event` and `export type { … } from` are edges too
    expect(graph.get("Contract")).toContain("Event")
    expect(graph.get("Skill")).toContain("Contract")
  })

  it("finds a loop when there is one (type-only and through several modules)", () => {
    const g = new Map([
      ["Plugin", ["Skill"]],
      ["Skill", ["Agent"]],
      ["Agent", ["Plugin", "Tools"]],
      ["Tools", []],
      ["Crew", ["ReportPolicy"]],
      ["ReportPolicy", ["Crew"]]
    ])
    expect(loops(g)).toEqual([
      ["Agent", "Plugin", "Skill"],
      ["Crew", "ReportPolicy"]
    ])
  })

  it("has no loops", () => {
    expect(loops(graph)).toEqual([])
  })

  it("keeps the plugin-author contracts beneath the machinery that runs them", () => {
    const machinery = ["Agent", "Crew", "Plugin", "Skill", "Session"]
    for (const contract of ["Contract", "ReportPolicy", "Tools", "Workspace", "Event"]) {
      const below = reaches(graph, contract)
      expect(
        machinery.filter((m) => below.has(m)),
        `${contract} reaches machinery`
      ).toEqual([])
    }
  })
})
