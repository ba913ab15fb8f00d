/**
 * The glob of `list_files` and `grep`, planned once for every engine: a glob without `/` matches file
 * names at any depth, one with `/` matches the path relative to the listed or searched directory,
 * and a leading `!` selects the files that do NOT match. The plan narrows the walk to the glob's
 * literal directory prefix (`src/api/**\/*.ts` walks only `src/api`) and says how to hand the glob
 * to ripgrep without letting it override ignore files: ripgrep's `--glob` always wins over
 * `.gitignore`, so a file-name pattern goes in as a file type (`--type-add`), which does not.
 *
 * @example
 * ```ts
 * const plan = planGlob("src", "api/**\/*.ts")
 * plan.dirRel              // "src/api"
 * plan.rgArgs              // ["--type-add", "musekit:*.ts", "--type", "musekit"]
 * plan.test("src/api/v1/user.ts") // true
 * ```
 */
import { lstat } from "node:fs/promises"
import * as path from "node:path"
import picomatch from "picomatch"

export interface GlobPlan {
  /** The directory to walk or search: the start directory, narrowed to the glob's literal prefix. */
  readonly dirRel: string
  /** Whether a workspace-relative file path is selected. */
  readonly test: (rel: string) => boolean
  /** ripgrep arguments that select (a superset of) the same files and respect ignore files. */
  readonly rgArgs: ReadonlyArray<string>
  /** `rgArgs` select exactly the right files; otherwise ripgrep's results go through `test`. */
  readonly rgExact: boolean
}

const META = /[*?[\]{}()!+@\\]/

const join = (a: string, b: string) => (a === "" ? b : b === "" ? a : `${a}/${b}`)

const baseName = (p: string) => p.slice(p.lastIndexOf("/") + 1)

/** A glob ripgrep can take as a file type: one file-name segment, no `:` (its type syntax). */
const typeable = (segment: string) => segment !== "" && segment !== "**" && !segment.includes(":")

export const planGlob = (startRel: string, glob: string | undefined): GlobPlan => {
  const start = startRel === "." ? "" : startRel
  const within = (rel: string) => (start === "" ? rel : rel.slice(start.length + 1))
  if (glob === undefined || glob.trim() === "") return { dirRel: start, test: () => true, rgArgs: [], rgExact: true }
  const negated = glob.startsWith("!")
  const body = (negated ? glob.slice(1) : glob).replace(/^\.\//, "").replace(/^\/+/, "")
  const isMatch = picomatch(body, { dot: true })
  const byPath = body.includes("/")
  const matches = byPath ? (rel: string) => isMatch(within(rel)) : (rel: string) => isMatch(baseName(rel))
  const test = negated ? (rel: string) => !matches(rel) : matches
  const last = baseName(body)
  if (negated) {
    return byPath || !typeable(body)
      ? { dirRel: start, test, rgArgs: [], rgExact: false }
      : { dirRel: start, test, rgArgs: ["--type-add", `musekitnot:${body}`, "--type-not", "musekitnot"], rgExact: true }
  }
  const rgArgs = typeable(last) ? ["--type-add", `musekit:${last}`, "--type", "musekit"] : []
  if (!byPath) return { dirRel: start, test, rgArgs, rgExact: rgArgs.length > 0 }
  const segments = body.split("/")
  const literal: Array<string> = []
  for (const s of segments.slice(0, -1)) {
    if (META.test(s) || s === "." || s === "..") break
    literal.push(s)
  }
  return { dirRel: join(start, literal.join("/")), test, rgArgs, rgExact: false }
}

/**
 * The plan's directory if every segment below the start is a real directory; the start directory
 * when one is a symlink (a walk never follows one out of the workspace); `undefined` when it does
 * not exist (nothing can match).
 */
export const walkableDir = async (root: string, startRel: string, plan: GlobPlan): Promise<string | undefined> => {
  const start = startRel === "." ? "" : startRel
  if (plan.dirRel === start) return start
  const rest = plan.dirRel.slice(start === "" ? 0 : start.length + 1).split("/")
  let at = start
  for (const segment of rest) {
    at = join(at, segment)
    const st = await lstat(path.join(root, at)).catch(() => undefined)
    if (st === undefined) return undefined
    if (st.isSymbolicLink()) return start
    if (!st.isDirectory()) return undefined
  }
  return plan.dirRel
}
