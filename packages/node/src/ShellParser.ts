/**
 * A `Shell.Parser` over tree-sitter-bash, run as WebAssembly (`web-tree-sitter`): it reduces a
 * command line to simple commands of words after quote removal, and names every construct it does
 * not reduce (command substitution, `[[ … ]]`, arithmetic, functions, bash-only quoting that `sh`
 * reads differently, syntax errors, …).
 *
 * The WASM loads on first use, asynchronously (about 0.1–0.3 s on a small machine; see
 * BENCHMARKS.md), so start-up does not wait for it: `warm` starts the load early without blocking.
 *
 * @example
 * ```ts
 * import { Approvals, Shell } from "@musekit/core"
 * import { ShellParser } from "@musekit/node"
 * import { Effect } from "effect"
 *
 * const analysis = Effect.runPromise(Shell.analyze(ShellParser.parser, "npm test && git push"))
 * const policy = Approvals.layer({ mode: "auto-edit", rules: [], shell: ShellParser.parser })
 * ```
 */
import { createRequire } from "node:module"
import type { Shell } from "@musekit/core"
import { Effect } from "effect"
import type * as TreeSitter from "web-tree-sitter"

type Node = TreeSitter.Node

interface Loaded {
  readonly parser: TreeSitter.Parser
}

/** Where the two .wasm files are: resolved from this module (a bundle that inlines this module must keep the packages resolvable). */
export interface Files {
  /** web-tree-sitter's runtime (`web-tree-sitter/web-tree-sitter.wasm`). */
  readonly runtime: string
  /** The bash grammar (`tree-sitter-bash/tree-sitter-bash.wasm`). */
  readonly grammar: string
}

const defaultFiles = (): Files => {
  const require = createRequire(import.meta.url)
  return {
    runtime: require.resolve("web-tree-sitter/web-tree-sitter.wasm"),
    grammar: require.resolve("tree-sitter-bash/tree-sitter-bash.wasm")
  }
}

const loadWith = async (files: () => Files): Promise<Loaded> => {
  const where = files()
  const ts = (await import("web-tree-sitter")) as typeof TreeSitter
  // the runtime finds its .wasm beside its own module unless told: a bundle moves the module
  await ts.Parser.init({ locateFile: () => where.runtime })
  const language = await ts.Language.load(where.grammar)
  const parser = new ts.Parser()
  parser.setLanguage(language)
  // the first parse compiles most of the grammar's code; do it now rather than at the first question
  parser.parse("true")?.delete()
  return { parser }
}

/**
 * A parser over the given files (default: resolved from this module). It loads at its first use;
 * if loading fails, every command is reported as not analysable (so rules never allow it and it
 * asks), with the reason, instead of failing the session.
 */
export const make = (files: () => Files = defaultFiles): Shell.Parser & { readonly warm: () => void } => {
  let loading: Promise<Loaded> | undefined
  const load = () => {
    loading ??= loadWith(files)
    return loading
  }
  return {
    parse: (source) =>
      Effect.promise(() =>
        load().then(
          (loaded) => parseSync(loaded, source),
          (e: unknown): Shell.Script => ({
            commands: [],
            hidden: [`the shell parser could not be loaded (${e instanceof Error ? e.message : String(e)})`]
          })
        )
      ),
    warm: () => {
      load().catch(() => undefined)
    }
  }
}

/** Parse with a loaded parser. */
const parseSync = (loaded: Loaded, source: string): Shell.Script => {
  const tree = loaded.parser.parse(source)
  if (!tree) return { commands: [], hidden: ["the command could not be parsed"] }
  try {
    return reduce(tree.rootNode, source)
  } finally {
    tree.delete()
  }
}

const shared = make()

/** The parser (the WASM loads at its first use). */
export const parser: Shell.Parser = shared

/** Start loading the parser in the background (idempotent; a failure shows at first use). */
export const warm = (): void => shared.warm()

// ---------------------------------------------------------------------------------------------
// reduction of the syntax tree
// ---------------------------------------------------------------------------------------------

interface Ctx {
  readonly commands: Array<Shell.SimpleCommand>
  readonly hidden: Array<string>
  /** Ids of `command`-like nodes reduced, to find any the walk did not reach. */
  readonly seen: Set<number>
}

const hide = (ctx: Ctx, why: string) => {
  if (!ctx.hidden.includes(why)) ctx.hidden.push(why)
}

const COMMAND_TYPES = new Set(["command", "declaration_command", "unset_command"])

/** Statement containers whose named children are statements, and the keyword tokens they may hold. */
const CONTAINERS = new Set([
  "program",
  "list",
  "pipeline",
  "subshell",
  "compound_statement",
  "do_group",
  "if_statement",
  "elif_clause",
  "else_clause",
  "while_statement",
  "negated_command"
])

const OPERATORS = new Set([
  "&&",
  "||",
  ";",
  "&",
  "|",
  "\n",
  "(",
  ")",
  "{",
  "}",
  "!",
  "if",
  "then",
  "fi",
  "elif",
  "else",
  "while",
  "until",
  "do",
  "done",
  ";;"
])

const reduce = (root: Node, source: string): Shell.Script => {
  const ctx: Ctx = { commands: [], hidden: [], seen: new Set() }
  if (root.hasError) hide(ctx, "the command does not parse as shell syntax")
  // where tree-sitter-bash and sh read the text differently: tree-sitter takes `\<newline>` for
  // whitespace (sh joins the two sides: `r\<newline>m` is `rm`) and a carriage return for a blank
  if (/[^\s]\\\n[^\s]/.test(source))
    hide(ctx, "a line continuation inside a word (the parser and sh read it differently)")
  if (source.includes("\r")) hide(ctx, "a carriage return (the parser and sh read it differently)")
  statement(root, ctx, [])
  // every command the parser found is checked by deny rules, also where the walk did not reach
  const missed = root.descendantsOfType([...COMMAND_TYPES]).filter((n): n is Node => !!n && !ctx.seen.has(n.id))
  if (missed.length > 0) {
    hide(ctx, "a construct the check does not follow")
    for (const n of missed) simpleCommand(n, ctx, [])
  }
  return { commands: ctx.commands, hidden: ctx.hidden }
}

/** Walk a statement-level node. `redirects` are those of an enclosing redirected statement. */
const statement = (node: Node, ctx: Ctx, redirects: ReadonlyArray<Shell.Redirect>): void => {
  switch (node.type) {
    case "comment":
      return
    case "command":
    case "declaration_command":
    case "unset_command":
      simpleCommand(node, ctx, redirects)
      return
    case "variable_assignment":
    case "variable_assignments": {
      const assignments = node.type === "variable_assignment" ? [node] : node.namedChildren
      const words = assignments.filter((n): n is Node => !!n).map((a) => assignment(a, ctx))
      ctx.commands.push({ assignments: words, argv: [], redirects })
      return
    }
    case "redirected_statement": {
      const own: Array<Shell.Redirect> = [...redirects]
      const body = node.childForFieldName("body")
      const nested: Array<Node> = []
      for (const c of node.namedChildren) {
        if (!c || c.id === body?.id) continue
        redirect(c, ctx, own, nested)
      }
      if (body) {
        if (body.type === "command" || body.type === "declaration_command" || body.type === "unset_command") {
          statement(body, ctx, own)
        } else {
          if (own.some((r) => r._tag === "HereDoc")) hide(ctx, "a here-document given to a compound command")
          const files = own.filter((r) => r._tag === "File")
          statement(body, ctx, [])
          // a redirect of a group applies to every command in it: keep it on a command of its own
          if (files.length > 0)
            ctx.commands.push({ assignments: [], argv: [{ text: ":", literal: true }], redirects: files })
        }
      }
      for (const n of nested) statement(n, ctx, [])
      return
    }
    case "for_statement": {
      for (const v of node.childrenForFieldName("value")) if (v) word(v, ctx)
      // the loop assigns its variable (which may be PATH): a rule must cover that like `NAME=value`
      const variable = node.childForFieldName("variable")
      ctx.commands.push({
        assignments: [{ text: `${variable?.text ?? "?"}=…`, literal: false }],
        argv: [],
        redirects: []
      })
      const body = node.childForFieldName("body")
      if (body) statement(body, ctx, redirects)
      return
    }
    case "case_statement": {
      const value = node.childForFieldName("value")
      if (value) word(value, ctx)
      for (const item of node.namedChildren) {
        if (item?.type !== "case_item") continue
        for (let i = 0; i < item.childCount; i++) {
          const c = item.child(i)!
          const field = item.fieldNameForChild(i)
          if (field === "value") word(c, ctx)
          else if (field === "fallthrough" || field === "termination") {
            if (c.type !== ";;") hide(ctx, `${c.type} in case (bash only)`)
          } else if (c.isNamed && c.type !== "comment") statement(c, ctx, [])
          else if (!OPERATORS.has(c.type) && c.type !== "|") hide(ctx, `${c.type} in case`)
        }
      }
      return
    }
    case "function_definition":
      hide(ctx, "a function definition")
      for (const c of node.namedChildren) if (c && c.type !== "word") statement(c, ctx, [])
      return
    case "test_command":
      testCommand(node, ctx, redirects)
      return
    case "ERROR":
      hide(ctx, "the command does not parse as shell syntax")
      for (const c of node.namedChildren) if (c) statement(c, ctx, [])
      return
    default:
      if (CONTAINERS.has(node.type)) {
        for (let i = 0; i < node.childCount; i++) {
          const c = node.child(i)!
          if (c.isNamed) statement(c, ctx, node.type === "negated_command" || node.type === "program" ? redirects : [])
          else if (c.type === "|&") hide(ctx, "|& (bash only; sh reads it differently)")
          else if (!OPERATORS.has(c.type)) hide(ctx, `${JSON.stringify(c.type)} in a command list`)
        }
        return
      }
      hide(ctx, `${node.type.replace(/_/g, " ")} (not reduced to plain words)`)
      substitutions(node, ctx)
  }
}

/** `[ … ]`: a command named `[`; `[[ … ]]`: bash evaluates arithmetic in it, so it is not reduced. */
const testCommand = (node: Node, ctx: Ctx, redirects: ReadonlyArray<Shell.Redirect>) => {
  const open = node.child(0)?.type
  if (open !== "[") {
    hide(ctx, `${open ?? "a test"} … (bash conditional expressions evaluate arithmetic)`)
    substitutions(node, ctx)
    return
  }
  const argv: Array<Shell.Word> = []
  const leaves = (n: Node) => {
    for (let i = 0; i < n.childCount; i++) {
      const c = n.child(i)!
      if (["unary_expression", "binary_expression", "parenthesized_expression"].includes(c.type)) leaves(c)
      else if (c.isNamed) argv.push(c.type === "test_operator" ? { text: c.text, literal: true } : word(c, ctx))
      else argv.push({ text: c.type, literal: true })
    }
  }
  leaves(node)
  ctx.commands.push({ assignments: [], argv, redirects })
}

const assignment = (node: Node, ctx: Ctx): Shell.Word => {
  const name = node.childForFieldName("name")
  const value = node.childForFieldName("value")
  const op = node.text.slice((name?.endIndex ?? node.startIndex) - node.startIndex).startsWith("+=") ? "+=" : "="
  if (name?.type !== "variable_name") {
    hide(ctx, "an assignment to an array element")
    if (value) word(value, ctx)
    return { text: node.text, literal: false }
  }
  if (!value) return { text: `${name.text}${op}`, literal: true }
  if (value.type === "array") {
    hide(ctx, "an array assignment (bash only)")
    substitutions(value, ctx)
    return { text: node.text, literal: false }
  }
  const v = word(value, ctx)
  return { text: `${name.text}${op}${v.text}`, literal: v.literal }
}

const simpleCommand = (node: Node, ctx: Ctx, redirects: ReadonlyArray<Shell.Redirect>) => {
  if (ctx.seen.has(node.id)) return
  ctx.seen.add(node.id)
  const assignments: Array<Shell.Word> = []
  const argv: Array<Shell.Word> = []
  const own: Array<Shell.Redirect> = [...redirects]
  const nested: Array<Node> = []
  if (node.type !== "command") argv.push({ text: node.child(0)?.type ?? node.type, literal: true })
  for (let i = 0; i < node.childCount; i++) {
    const c = node.child(i)!
    const field = node.fieldNameForChild(i)
    if (node.type !== "command" && i === 0) continue
    if (field === "redirect" || c.type.endsWith("_redirect")) redirect(c, ctx, own, nested)
    else if (c.type === "variable_assignment") {
      if (node.type === "command") assignments.push(assignment(c, ctx))
      else argv.push(assignment(c, ctx))
    } else if (c.type === "command_name") {
      const inner = c.namedChild(0)
      argv.push(inner ? word(inner, ctx) : { text: c.text, literal: false })
    } else if (c.isNamed) {
      if (c.type === "subshell" || c.type === "comment") {
        if (c.type === "subshell") {
          hide(ctx, "a subshell inside a command")
          statement(c, ctx, [])
        }
        continue
      }
      argv.push(word(c, ctx))
    } else if (c.type === "=~" || c.type === "==") {
      argv.push({ text: c.type, literal: true })
    } else hide(ctx, `${JSON.stringify(c.type)} in a command`)
  }
  ctx.commands.push({ assignments, argv, redirects: own })
  for (const n of nested) statement(n, ctx, [])
}

const redirect = (node: Node, ctx: Ctx, out: Array<Shell.Redirect>, nested: Array<Node>) => {
  switch (node.type) {
    case "file_redirect": {
      const dest = node.childrenForFieldName("destination").filter((n): n is Node => !!n)
      let op = ""
      for (let i = 0; i < node.childCount; i++) {
        const c = node.child(i)!
        if (!c.isNamed) op += c.type
      }
      if (op === "&>" || op === "&>>" || op === ">&" || op === "<&" || op === ">&-" || op === "<&-") {
        const target = dest[0]
        if (op.endsWith("-") || (target && /^(\d+|-)$/.test(target.text) && (op === ">&" || op === "<&"))) {
          out.push({ _tag: "Dup", text: node.text })
          return
        }
        if (op === "&>" || op === "&>>") hide(ctx, `${op} (bash only; sh reads it differently)`)
      }
      if (dest.length !== 1) {
        hide(ctx, "a redirect the check does not follow")
        for (const d of dest) word(d, ctx)
        return
      }
      out.push({ _tag: "File", op: op || ">", target: word(dest[0]!, ctx) })
      return
    }
    case "heredoc_redirect": {
      let body = ""
      for (let i = 0; i < node.childCount; i++) {
        const c = node.child(i)!
        const field = node.fieldNameForChild(i)
        if (c.type === "heredoc_body") {
          body = c.text
          substitutions(c, ctx)
        } else if (c.type.endsWith("_redirect")) redirect(c, ctx, out, nested)
        else if (field === "right" || c.type === "pipeline" || c.type === "list" || COMMAND_TYPES.has(c.type)) {
          nested.push(c)
        } else if (c.isNamed && !["heredoc_start", "heredoc_end", "heredoc_content"].includes(c.type)) {
          nested.push(c)
        }
      }
      out.push({ _tag: "HereDoc", body })
      return
    }
    case "herestring_redirect":
      hide(ctx, "<<< (bash only; sh reads it differently)")
      substitutions(node, ctx)
      return
    default:
      hide(ctx, `${node.type.replace(/_/g, " ")} (not reduced to plain words)`)
      substitutions(node, ctx)
  }
}

/** A command, process or arithmetic substitution (and the commands in it): it always hides. */
const substitution = (node: Node, ctx: Ctx) => {
  if (node.type === "command_substitution" || node.type === "process_substitution") {
    hide(
      ctx,
      node.type === "command_substitution" ? "command substitution $(…) or `…`" : "process substitution <(…) / >(…)"
    )
    for (const s of node.namedChildren) if (s) statement(s, ctx, [])
  } else if (node.type === "arithmetic_expansion") {
    hide(ctx, "arithmetic expansion $((…))")
    substitutions(node, ctx)
  } else substitutions(node, ctx)
}

/** Find substitutions anywhere under `node`. */
const substitutions = (node: Node, ctx: Ctx) => {
  for (const c of node.namedChildren) if (c) substitution(c, ctx)
}

const GLOB = /[*?[\]{}]/

/** Remove backslash escapes of an unquoted word; `open` when an unescaped glob, brace or leading `~` remains. */
const unquoted = (text: string, first: boolean): { text: string; open: boolean } => {
  let out = ""
  let open = first && text.startsWith("~")
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!
    if (c === "\\") {
      if (i + 1 < text.length) {
        if (text[i + 1] !== "\n") out += text[i + 1]
        i++
      }
      continue
    }
    if (GLOB.test(c)) open = true
    out += c
  }
  return { text: out, open }
}

/** The text of a double-quoted region after its backslash escapes. */
const dquoted = (text: string) => text.replace(/\\([$`"\\\n])/g, (_, c: string) => (c === "\n" ? "" : c))

/** A word after quote removal. */
const word = (node: Node, ctx: Ctx): Shell.Word => {
  switch (node.type) {
    case "word":
    case "number": {
      if (node.namedChildCount > 0) {
        substitutions(node, ctx)
        return { text: node.text, literal: false }
      }
      const u = unquoted(node.text, true)
      return { text: u.open ? node.text : u.text, literal: !u.open }
    }
    case "raw_string":
      return { text: node.text.slice(1, -1), literal: true }
    case "string": {
      let text = ""
      let literal = true
      const inner0 = node.startIndex + 1
      let at = inner0
      const src = node.text
      for (const c of node.namedChildren) {
        if (!c) continue
        text += dquoted(src.slice(at - node.startIndex, c.startIndex - node.startIndex))
        if (c.type === "string_content") text += dquoted(c.text)
        else {
          literal = false
          text += c.text
          substitution(c, ctx)
        }
        at = c.endIndex
      }
      text += dquoted(src.slice(at - node.startIndex, src.length - 1))
      return literal ? { text, literal } : { text: node.text, literal: false }
    }
    case "concatenation": {
      let text = ""
      let literal = true
      let first = true
      for (let i = 0; i < node.childCount; i++) {
        const c = node.child(i)!
        const w = c.type === "word" ? wordPart(c, first) : word(c, ctx)
        if (!w.literal) literal = false
        text += w.text
        first = false
      }
      return literal ? { text, literal } : { text: node.text, literal: false }
    }
    case "simple_expansion":
    case "expansion": {
      const op = node.text
      if (node.type === "expansion" && /^\$\{[#!]?[A-Za-z0-9_@*?#$!-]+(?:\[[^\]]*\])?:?[=?]/.test(op)) {
        hide(ctx, `${op.length > 40 ? `${op.slice(0, 40)}…` : op} (an expansion that assigns or fails)`)
      }
      substitutions(node, ctx)
      return { text: node.text, literal: false }
    }
    case "command_substitution":
    case "process_substitution":
    case "arithmetic_expansion":
      substitution(node, ctx)
      return { text: node.text, literal: false }
    case "ansi_c_string": {
      hide(ctx, "$'…' quoting (bash only; sh reads it differently)")
      return { text: ansiC(node.text.slice(2, -1)), literal: true }
    }
    case "translated_string":
      hide(ctx, '$"…" quoting (bash only; sh reads it differently)')
      substitutions(node, ctx)
      return { text: node.text, literal: false }
    case "brace_expression":
    case "extglob_pattern":
      return { text: node.text, literal: false }
    case "variable_assignment":
      return assignment(node, ctx)
    case "variable_name":
      return { text: node.text, literal: true }
    default:
      hide(ctx, `${node.type.replace(/_/g, " ")} in a word`)
      substitutions(node, ctx)
      return { text: node.text, literal: false }
  }
}

/** A `word` piece of a concatenation (a leading `~` only counts at the start of the whole word). */
const wordPart = (node: Node, first: boolean): Shell.Word => {
  const u = unquoted(node.text, first)
  return { text: u.open ? node.text : u.text, literal: !u.open }
}

/** Decode bash `$'…'` escapes (for deny rules: the text bash would see). */
const ansiC = (s: string): string =>
  s.replace(/\\(x[0-9a-fA-F]{1,2}|u[0-9a-fA-F]{1,4}|U[0-9a-fA-F]{1,8}|[0-7]{1,3}|c.|.)/g, (_, e: string) => {
    const map: Record<string, string> = {
      n: "\n",
      t: "\t",
      r: "\r",
      a: "\x07",
      b: "\b",
      e: "\x1b",
      E: "\x1b",
      f: "\f",
      v: "\v"
    }
    if (e[0] === "x" || e[0] === "u" || e[0] === "U") return String.fromCodePoint(Number.parseInt(e.slice(1), 16))
    if (/^[0-7]/.test(e)) return String.fromCharCode(Number.parseInt(e, 8))
    if (e[0] === "c") return String.fromCharCode(e.charCodeAt(1) & 31)
    return map[e] ?? e
  })
