/**
 * The long prompt texts of the skills, kept as Markdown files in the package's `prompts/` folder
 * (`planner.md`, `grill.md`, `judge.md`, `goal.md`).
 *
 * They are read on first use, relative to this module: `src/Prompts.ts` and the built
 * `dist/index.js` both sit one level below the package root, so `../prompts/` is the same folder
 * under vitest and in the published package. Every text can be replaced through the plugin's
 * `prompts` option.
 *
 * @example
 * ```ts
 * import { Prompts } from "@musekit/plugin-skills"
 *
 * const system = Prompts.planner() // the text of prompts/planner.md
 * ```
 */
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"

/** The names of the prompt files (without `.md`). */
export type Name = "planner" | "grill" | "judge" | "goal"

/** The folder the prompt files are read from. */
export const directory: string = fileURLToPath(new URL("../prompts/", import.meta.url))

const cache = new Map<Name, string>()

/** The text of `prompts/<name>.md` (trailing whitespace removed). */
export const load = (name: Name): string => {
  const cached = cache.get(name)
  if (cached !== undefined) return cached
  const file = `${directory}${name}.md`
  let text: string
  try {
    text = readFileSync(file, "utf8").trimEnd()
  } catch (e) {
    throw new Error(
      `the prompt file ${file} of @musekit/plugin-skills could not be read (${
        (e as NodeJS.ErrnoException).code ?? String(e)
      }); the package's prompts/ folder must be installed beside dist/`
    )
  }
  cache.set(name, text)
  return text
}

/** System prompt of the planner agent. */
export const planner = (): string => load("planner")

/** System prompt of the reviewer agent that grills plans. */
export const grill = (): string => load("grill")

/** System prompt of the judge of goals without a check command. */
export const judge = (): string => load("judge")

/** The opening of a goal; `{{check}}` is replaced by how the goal is checked. */
export const goal = (): string => load("goal")

/** Replace `{{key}}` placeholders. */
export const fill = (template: string, values: Record<string, string>): string =>
  template.replace(/\{\{(\w+)\}\}/g, (m, key: string) => values[key] ?? m)
