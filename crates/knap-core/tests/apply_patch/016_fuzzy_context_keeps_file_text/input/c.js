if (x) {   
	call();
}
