/*
 * The args table's filter form (#filters), built from the field
 * descriptors of filters.mjs (the server's schema): a select for an enum or an optional bool, a
 * checkbox for a bool, a number or text input otherwise (a text field's
 * suggestions as a datalist). Reads and fills it by the same descriptors.
 */
import { h } from './dom.mjs';
import { choicesOf, filterFields, formValue } from './filters.mjs';

/** The control of one field (id "f-" + its name). */
function control(field) {
  const id = `f-${field.name}`, name = field.name;
  const choices = choicesOf(field);
  if (choices) {
    return h('select', { id, name }, h('option', { value: '', text: 'any' }),
      ...choices.map((v) => h('option', { value: v, text: v })));
  }
  if (field.kind === 'bool') return h('input', { id, name, type: 'checkbox', value: 'true' });
  if (field.kind === 'number') {
    return h('input', {
      id, name, type: 'number', min: field.min, max: field.default !== undefined ? field.max : null,
      step: 1, value: field.default, class: 'n',
    });
  }
  return h('input', {
    id, name, type: 'text', list: field.suggestions ? `${name}-suggestions` : null,
    placeholder: field.placeholder, size: field.size, spellcheck: 'false',
  });
}

/** One field's label: its name above the control, or a checkbox before its label. */
function fieldLabel(field) {
  const input = control(field);
  const text = field.label || field.name;
  if (input.type === 'checkbox') return h('label', { title: field.title }, input, ` ${text}`);
  return h('label', { title: field.title }, `${text} `, input);
}

/** Puts a label per field before the form's first button, and the datalists at its end. */
export function buildFilterForm(form, fields = filterFields()) {
  const first = form.querySelector('button');
  for (const field of fields) form.insertBefore(fieldLabel(field), first);
  for (const field of fields) {
    if (!field.suggestions) continue;
    form.append(h('datalist', { id: `${field.name}-suggestions` },
      ...field.suggestions.map((v) => h('option', { value: v }))));
  }
}

/** The form's raw values, by name. */
export function readFilterForm(form, fields = filterFields()) {
  const data = new FormData(form);
  return Object.fromEntries(fields.map((f) => [f.name, data.get(f.name) ?? '']));
}

/** Shows normalised filters in the form. */
export function fillFilterForm(form, f, fields = filterFields()) {
  for (const field of fields) {
    const input = form.elements.namedItem(field.name);
    if (!input) continue;
    if (input.type === 'checkbox') input.checked = f[field.name] === 'true';
    else input.value = formValue(field, f[field.name]);
  }
}
