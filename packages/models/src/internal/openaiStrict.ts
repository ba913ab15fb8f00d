const isRecord = (u: unknown): u is Record<string, any> => typeof u === "object" && u !== null && !Array.isArray(u)

/**
 * Whether a JSON schema meets OpenAI's strict-mode rules: every object lists all of its
 * properties in `required` and has `additionalProperties: false`, all the way down.
 */
export const strictCompatible = (schema: unknown): boolean => {
  if (Array.isArray(schema)) return schema.every(strictCompatible)
  if (!isRecord(schema)) return true
  const isObject = schema.type === "object" || (Array.isArray(schema.type) && schema.type.includes("object"))
  if (isObject || schema.properties !== undefined) {
    if (schema.additionalProperties !== false) return false
    const keys = Object.keys(schema.properties ?? {})
    const required = new Set<string>(Array.isArray(schema.required) ? schema.required : [])
    if (!keys.every((k) => required.has(k))) return false
  }
  for (const key of ["properties", "$defs", "definitions", "patternProperties"]) {
    if (isRecord(schema[key]) && !Object.values(schema[key]).every(strictCompatible)) return false
  }
  for (const key of ["items", "prefixItems", "anyOf", "oneOf", "allOf", "not", "additionalProperties"]) {
    if (schema[key] !== undefined && typeof schema[key] !== "boolean" && !strictCompatible(schema[key])) return false
  }
  return true
}

/**
 * A Responses request with each function tool (and a JSON response format) sent with `strict: true`
 * only when its schema allows it, so tools with optional parameters work instead of being rejected
 * by OpenAI. Works on the request object before it is encoded; returns it unchanged when nothing
 * needs a change.
 */
export const strictWhereSafe = <R extends Record<string, any>>(request: R): R => {
  let tools: unknown = request.tools
  if (Array.isArray(tools) && tools.some(unsafeTool)) {
    tools = tools.map((tool) => (unsafeTool(tool) ? { ...tool, strict: false } : tool))
  }
  const text = request.text
  const format = isRecord(text) ? text.format : undefined
  const unsafeFormat =
    isRecord(format) && format.type === "json_schema" && format.strict === true && !strictCompatible(format.schema)
  if (tools === request.tools && !unsafeFormat) return request
  return {
    ...request,
    tools,
    ...(unsafeFormat ? { text: { ...text, format: { ...format, strict: false } } } : {})
  }
}

const unsafeTool = (tool: unknown): boolean =>
  isRecord(tool) && tool.type === "function" && tool.strict === true && !strictCompatible(tool.parameters)
