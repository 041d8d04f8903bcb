function a() {
  return 10;
}

function b() {
  return 20;
}
